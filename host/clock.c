/* clock: real and virtual time (see clock.h). */
#include "clock.h"

#include <time.h>

static int is_virtual;   /* virtual mode on */
static double virt_now;  /* the virtual time, seconds since the epoch */

static double read_clock(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double hclock_now(void)
{
	return is_virtual ? virt_now : read_clock(CLOCK_REALTIME);
}

double hclock_mono(void) { return read_clock(CLOCK_MONOTONIC); }
double hclock_wall(void) { return read_clock(CLOCK_REALTIME); }

void hclock_set_virtual(int on)
{
	if (on && !is_virtual)
		virt_now = read_clock(CLOCK_REALTIME);
	is_virtual = on;
}

int hclock_is_virtual(void) { return is_virtual; }

int hclock_advance_to(double t)
{
	if (!is_virtual)
		return -1;
	if (t > virt_now)
		virt_now = t;
	return 0;
}
