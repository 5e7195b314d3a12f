# Prints, at the end of a `make test` log, what failed and the last lines
# each failed test printed before it failed: CI shows only a log's tail,
# which a failing suite fills with its cluster dump.
# Usage: awk -f hack/failure-summary.awk make-test.log
function keep(name, line) {
	n[name]++
	buf[name, n[name] % depth] = line
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
		print "==== FAIL: " name ", its last lines:"
		oldest = n[name] >= depth ? n[name] - depth + 1 : 1
		chars = 0 # the most last lines that fit the test's share
		for (first = n[name] + 1; first > oldest; first--) {
			chars += length(substr(buf[name, (first - 1) % depth], 1, width)) + 1
			if (chars > budget / leaves) break
		}
		for (i = first; i <= n[name]; i++) print substr(buf[name, i % depth], 1, width)
	}
	print "==== " failures + 0 " failed tests (with their parents); failed packages and make errors:"
	for (i = 1; i <= tails; i++) if (tail[i] !~ /^ok/) print tail[i]
}

# A parent fails with its subtests: only the subtests' lines are shown.
function leaf(name,    g) {
	for (g = 1; g <= failures; g++) if (index(failed[g], name "/") == 1) return 0
	return 1
}
