# Prints, at the end of a `make test` log, what failed and the last lines
# each failed test printed before it failed: CI shows only a log's tail,
# which a failing suite fills with its cluster dump.
# Usage: awk -f hack/failure-summary.awk make-test.log
function keep(name, line) {
	n[name]++
	buf[name, n[name] % depth] = line
	# t.Log and t.Error lines ("    file_test.go:42: ..."), kept apart: a
	# test that prints a long report after it failed (the soak's, with
	# fmt.Print) would push its error out of its last lines.
	if (line ~ /^ +[^ :]+\.go:[0-9]+: /) {
		logs[name]++
		logbuf[name, logs[name] % depth] = line
		logat[name, logs[name] % depth] = n[name]
	}
}
# CI shows about 12 000 characters of a log's tail: the failed tests' lines
# share 8 000 of them, so that a test that logs a long report after its
# failure still shows the failure.
BEGIN { depth = 80; width = 400; budget = 8000 }
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3 }
/^ *--- (PASS|FAIL|SKIP): / {
	if ($2 == "FAIL:") failed[++failures] = $3
	if ($0 ~ /^---/) cur = "" # a top-level test ended
	# Without -v, go test prints a failed test's log after this line,
	# indented one level deeper than it.
	report = $2 == "FAIL:" ? $3 : ""
	match($0, /^ */); depthOfReport = RLENGTH + 4
	next
}
report != "" && match($0, /^ +/) && RLENGTH >= depthOfReport { keep(report, $0); next }
{ report = "" }
cur != "" { keep(cur, $0) }
/^The following tests FAILED:/ { ctest = 1 }
ctest && /^\t *[0-9]+ - / { tail[++tails] = $0 } # ctest's list of failed tests
/^(FAIL|ok)[ \t]/ || /^e2e: FAIL/ || /^panic: / || /\[  FAILED  \]/ || /^make: \*\*\*/ { tail[++tails] = $0 }
END {
	leaves = 0
	for (f = 1; f <= failures; f++) if (leaf(failed[f])) leaves++
	for (f = 1; f <= failures; f++) {
		name = failed[f]
		if (!leaf(name)) continue
		share = budget / leaves
		oldest = n[name] >= depth ? n[name] - depth + 1 : 1
		first = lastLines(name, n[name], oldest, share / 2)
		# Its t.Log and t.Error lines from before those last lines, in the
		# other half of its share; without any, the last lines take it all.
		oldestLog = logs[name] >= depth ? logs[name] - depth + 1 : 1
		for (newestLog = logs[name]; newestLog >= oldestLog && logat[name, newestLog % depth] >= first; newestLog--) {}
		if (newestLog >= oldestLog) {
			chars = 0
			for (firstLog = newestLog + 1; firstLog > oldestLog; firstLog--) {
				chars += length(substr(logbuf[name, (firstLog - 1) % depth], 1, width)) + 1
				if (chars > share / 2) break
			}
			print "==== FAIL: " name ", its t.Log and t.Error lines before its last lines:"
			for (i = firstLog; i <= newestLog; i++) print substr(logbuf[name, i % depth], 1, width)
		} else
			first = lastLines(name, n[name], oldest, share)
		print "==== FAIL: " name ", its last lines:"
		for (i = first; i <= n[name]; i++) print substr(buf[name, i % depth], 1, width)
	}
	print "==== " failures + 0 " failed tests (with their parents); failed packages and make errors:"
	for (i = 1; i <= tails; i++) if (tail[i] !~ /^ok/) print tail[i]
}

# The first of name's last lines, from newest down to oldest, that fit chars.
function lastLines(name, newest, oldest, chars,    first, used) {
	for (first = newest + 1; first > oldest; first--) {
		used += length(substr(buf[name, (first - 1) % depth], 1, width)) + 1
		if (used > chars) break
	}
	return first
}

# A parent fails with its subtests: only the subtests' lines are shown.
function leaf(name,    g) {
	for (g = 1; g <= failures; g++) if (index(failed[g], name "/") == 1) return 0
	return 1
}
