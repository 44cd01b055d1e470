"""The cases of an integration test program, run as they are declared.

    cases = Cases(before=fresh_dir, after=clean_up)

    @cases
    def some_behaviour(arg):        # arg: what before() returned, if not None
        check(cond, "what went wrong")

    sys.exit(cases.finish())

Each case prints "ok - NAME (T s)" or "not ok - NAME (T s)" with its
traceback; T is how long it took, setup and cleanup included. finish()
prints the closing line "N passed, N failed" that the suite
(tests/integration/lib.sh) reads, and returns the exit status.
"""
import sys
import time
import traceback


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Cases:
    def __init__(self, before=None, after=None):
        self.before = before
        self.after = after
        self.passed = self.failed = 0

    def __call__(self, fn):
        t0 = time.monotonic()
        try:
            arg = self.before() if self.before else None
            if arg is None:
                fn()
            else:
                fn(arg)
            self.passed += 1
            print(f"ok - {fn.__name__} ({time.monotonic() - t0:.1f} s)")
        except Exception:
            self.failed += 1
            print(f"not ok - {fn.__name__} ({time.monotonic() - t0:.1f} s)")
            for line in traceback.format_exc().splitlines():
                print("  | " + line)
        finally:
            if self.after:
                self.after()
        sys.stdout.flush()
        return fn

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0
