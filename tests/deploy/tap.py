"""A small TAP writer for the deploy tests: numbered checks, skips counted
apart (`ok N - name # SKIP reason`), details as comments, the plan last."""
import sys


class Tap:
    def __init__(self):
        self.n = 0

    def ok(self, cond, name, detail=""):
        """One check: ok when cond is true, else not ok with detail as comments."""
        self.n += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, name))
        if not cond and detail:
            self.comment(detail)
        sys.stdout.flush()
        return bool(cond)

    def skip(self, name, reason):
        """A check that could not run here: a skip, never a pass."""
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, reason))

    def comment(self, text):
        for line in str(text).splitlines():
            print("#   " + line)

    def finish(self):
        print("1..%d" % self.n)
        sys.exit(0)
