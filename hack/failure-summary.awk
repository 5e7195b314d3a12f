# Prints, at the end of a `make test` log, what failed and the last lines
# each failed test printed before it failed: CI shows only a log's tail,
# which a failing suite fills with its cluster dump.
# Usage: awk -f hack/failure-summary.awk make-test.log
function keep(name, line) {
	n[name]++
	buf[name, n[name] % depth] = line
}
BEGIN { depth = 25; width = 400 } # CI shows about 12 000 characters
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3 }
/^ *--- (PASS|FAIL|SKIP): / {
	if ($2 == "FAIL:") failed[++failures] = $3
	if ($0 ~ /^---/) cur = "" # a top-level test ended
	next
}
cur != "" { keep(cur, $0) }
/^The following tests FAILED:/ { ctest = 1 }
ctest && /^\t *[0-9]+ - / { tail[++tails] = $0 } # ctest's list of failed tests
/^(FAIL|ok)[ \t]/ || /^e2e: FAIL/ || /^panic: / || /\[  FAILED  \]/ || /^make: \*\*\*/ { tail[++tails] = $0 }
END {
	for (f = 1; f <= failures; f++) {
		name = failed[f]
		leaf = 1 # a parent fails with its subtests: show the subtests' lines
		for (g = 1; g <= failures; g++) if (index(failed[g], name "/") == 1) leaf = 0
		if (!leaf) continue
		print "==== FAIL: " name ", its last lines:"
		first = n[name] >= depth ? n[name] - depth + 1 : 1
		for (i = first; i <= n[name]; i++) print substr(buf[name, i % depth], 1, width)
	}
	print "==== " failures + 0 " failed tests (with their parents); failed packages and make errors:"
	for (i = 1; i <= tails; i++) if (tail[i] !~ /^ok/) print tail[i]
}
