# Stamps each stage line (">> ...") of a `make test` log with the minutes
# and seconds since the log began, and prints the stages' durations at the
# end, longest first: what CI's time goes to, from one clean-clone run.
# Usage: make test 2>&1 | awk -W interactive -f hack/stage-times.awk
# (-W interactive: mawk reads a pipe line by line, so the stamp is the
# line's time.)
function now() { srand(); return srand() } # srand() returns the previous seed: the clock it was seeded from
function clock(s) { return sprintf("%d:%02d", int(s / 60), s % 60) }
BEGIN { start = now() }
/^>> / {
	t = now() - start
	if (stages) took[stages] = t - began[stages]
	name[++stages] = substr($0, 4, 70)
	began[stages] = t
	$0 = ">> [" clock(t) "] " substr($0, 4)
}
{ print; fflush() }
END {
	if (!stages) exit
	took[stages] = now() - start - began[stages]
	print "stage times (m:ss from the stage's line to the next's), longest first:"
	for (i = 1; i <= stages; i++) order[i] = i
	for (i = 2; i <= stages; i++) # insertion sort: a few dozen stages
		for (j = i; j > 1 && took[order[j]] > took[order[j - 1]]; j--) { k = order[j]; order[j] = order[j - 1]; order[j - 1] = k }
	for (i = 1; i <= stages && i <= 15; i++) printf "  %6s  %s\n", clock(took[order[i]]), name[order[i]]
}
