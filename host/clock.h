/*
 * clock: the host's notion of time. Process-wide.
 *
 * Real mode: hclock_now() is the wall clock. Virtual mode (HYPD_CLOCK=virtual,
 * tests, the sandbox's fast mode): time starts at the real time when virtual
 * mode is switched on and moves only when the engine jumps it to the next
 * timer (hclock_advance_to), so simulated hours pass in milliseconds,
 * deterministically. hclock_mono() is always real and monotonic: it measures
 * how long the CPU has been busy (deadline slices), never simulated waits.
 */
#ifndef HYPD_CLOCK_H
#define HYPD_CLOCK_H

/* Seconds since the Unix epoch, real or virtual. */
double hclock_now(void);

/* Seconds since the Unix epoch from the wall clock, even in virtual mode. */
double hclock_wall(void);

/* Real monotonic seconds. */
double hclock_mono(void);

/* Switches virtual mode on (time continues from the current real time) or
 * off. */
void hclock_set_virtual(int on);
int hclock_is_virtual(void);

/* Virtual mode only: moves time forward to t. Never moves it backward.
 * Returns 0, or -1 in real mode. */
int hclock_advance_to(double t);

#endif
