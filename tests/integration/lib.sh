# Helpers for the integration suite (sourced inside the test VM).
#
# t NAME CMD...      one test: passes when CMD exits 0; its output is kept
#                    in $LOGDIR/NAME.log and shown when it fails.
# suite NAME CMD...  a program that runs many tests and ends with the line
#                    "N passed, N failed": its counts are added to ours.
# finish             print the closing line and exit non-zero on failure.

PASSED=0
FAILED=0
LOGDIR=${LOGDIR:-/tmp/presto-logs}
mkdir -p "$LOGDIR"

# A test still running after WATCHDOG seconds gets the kernel's view of
# every task (blocked ones and every CPU's backtrace) in the console log,
# once, so that a hang or a livelock can be diagnosed after the VM's own
# timeout kills it.
WATCHDOG=${WATCHDOG:-900}
_watch_file=$LOGDIR/.running
_watchdog() {
	local name start dumped=
	while sleep 30; do
		[ -f "$_watch_file" ] || continue
		read -r name start <"$_watch_file" || continue
		if [ $(($(date +%s) - start)) -ge "$WATCHDOG" ] &&
			[ "$dumped" != "$name" ]; then
			dumped=$name
			echo "watchdog: $name still running after $WATCHDOG s; task dump follows" >/dev/console
			echo w >/proc/sysrq-trigger
			echo l >/proc/sysrq-trigger
			# The dumps are below the console's log level.
			dmesg | tail -n 400 >/dev/console
			grep -A4 'fstype presto' /proc/self/mountstats >/dev/console
		fi
	done
}
_watchdog &
_running() { echo "$1 $(date +%s)" >"$_watch_file"; _t0=$SECONDS; }
_took() { echo "$((SECONDS - _t0)) s"; }

_show_failure() {
	echo "---- $1 (last lines of $LOGDIR/$1.log)"
	tail -n 30 "$LOGDIR/$1.log" | sed 's/^/  | /'
}

t() {
	local name=$1
	shift
	_running "$name"
	if "$@" >"$LOGDIR/$name.log" 2>&1; then
		PASSED=$((PASSED + 1))
		echo "ok - $name [$(_took)]"
	else
		FAILED=$((FAILED + 1))
		echo "not ok - $name [$(_took)]"
		_show_failure "$name"
	fi
}

suite() {
	local name=$1 line p f rc
	shift
	_running "$name"
	"$@" >"$LOGDIR/$name.log" 2>&1
	rc=$?
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$LOGDIR/$name.log" | tail -n1)
	if [ -z "$line" ]; then
		FAILED=$((FAILED + 1))
		echo "not ok - $name (no closing line, exit $rc)"
		_show_failure "$name"
		return
	fi
	p=${line%% passed*}
	f=${line#*passed, }
	f=${f%% failed*}
	PASSED=$((PASSED + p))
	FAILED=$((FAILED + f))
	if [ "$f" = 0 ] && [ "$rc" = 0 ]; then
		echo "ok - $name ($line) [$(_took)]"
	else
		[ "$f" != 0 ] || FAILED=$((FAILED + 1))
		echo "not ok - $name ($line, exit $rc) [$(_took)]"
		# Each failure with the reasons it gives under it ("  # ").
		awk '/^not ok/ { n = 12; print; next }
		     n && /^  # / { n--; print; next } { n = 0 }' \
			"$LOGDIR/$name.log" | sed 's/^/  | /'
	fi
}

finish() {
	echo "$PASSED passed, $FAILED failed"
	[ "$FAILED" = 0 ]
}

# The kernel log must hold no warning, bug, lockdep, KASAN or hung-task
# report. kmemleak is asked to scan first where it exists.
kernel_log_clean() {
	if [ -w /sys/kernel/debug/kmemleak ]; then
		echo scan >/sys/kernel/debug/kmemleak
		sleep 5
		echo scan >/sys/kernel/debug/kmemleak
		cat /sys/kernel/debug/kmemleak
		[ -z "$(cat /sys/kernel/debug/kmemleak)" ] || return 1
	fi
	! dmesg | grep -E -A30 'WARNING:|BUG:|Oops|general protection|possible circular|possible recursive|inconsistent lock|lock held when returning|suspicious RCU|KASAN|UBSAN|blocked for more than|sleeping function called'
}
