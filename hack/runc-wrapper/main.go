// Command runc-wrapper sits between a container engine and runc on machines whose
// capability bounding set lacks CAP_SYS_RESOURCE (sandboxed VMs): a privileged
// container asks runc for every capability, and runc fails with "unable to apply
// caps: operation not permitted". Before exec'ing the real runc, the wrapper
// removes CAP_SYS_RESOURCE from the OCI spec (or the exec process file) and
// raises a negative oomScoreAdj to 0, since lowering it needs the same capability.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const droppedCapability = "CAP_SYS_RESOURCE"

func main() {
	realRunc, err := findRealRunc()
	if err != nil {
		fail(err)
	}
	for _, file := range specFiles(os.Args[1:]) {
		if err := patchFile(file); err != nil {
			fail(err)
		}
	}
	args := append([]string{"runc"}, os.Args[1:]...)
	fail(syscall.Exec(realRunc, args, os.Environ()))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "runc-wrapper: %v\n", err)
	os.Exit(1)
}

// findRealRunc returns $REAL_RUNC or the first runc on PATH that is not this program.
func findRealRunc() (string, error) {
	if path := os.Getenv("REAL_RUNC"); path != "" {
		return path, nil
	}
	self, _ := os.Executable()
	for _, dir := range filepath.SplitList(os.Getenv("PATH") + ":/usr/sbin:/usr/bin:/usr/local/sbin") {
		candidate := filepath.Join(dir, "runc")
		if info, err := os.Stat(candidate); err == nil && !info.IsDir() && !sameFile(candidate, self) {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("no runc found on PATH; set REAL_RUNC")
}

func sameFile(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

// specFiles returns the OCI files named by runc's arguments: <bundle>/config.json
// for create and run, the process file for exec.
func specFiles(args []string) []string {
	var files []string
	for i, arg := range args {
		name, value, hasValue := strings.Cut(arg, "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		switch name {
		case "--bundle", "-b":
			files = append(files, filepath.Join(value, "config.json"))
		case "--process", "-p":
			files = append(files, value)
		}
	}
	return files
}

func patchFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	patched, changed, err := patchSpec(raw)
	if err != nil || !changed {
		return err
	}
	return os.WriteFile(path, patched, 0o600)
}

// patchSpec edits a runtime spec (capabilities under "process") or an exec
// process document (capabilities at the top), keeping every other field as is.
func patchSpec(raw []byte) ([]byte, bool, error) {
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber() // keep uids and rlimits exact
	var doc map[string]any
	if err := decoder.Decode(&doc); err != nil {
		return nil, false, err
	}
	process, ok := doc["process"].(map[string]any)
	if !ok {
		process = doc
	}
	dropped := dropCapability(process)
	clamped := clampOOMScoreAdj(process)
	changed := dropped || clamped
	if !changed {
		return raw, false, nil
	}
	patched, err := json.Marshal(doc)
	return patched, true, err
}

func dropCapability(process map[string]any) bool {
	capabilities, ok := process["capabilities"].(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for set, list := range capabilities {
		names, ok := list.([]any)
		if !ok {
			continue
		}
		kept := names[:0:0]
		for _, name := range names {
			if name != droppedCapability {
				kept = append(kept, name)
			}
		}
		if len(kept) != len(names) {
			capabilities[set] = kept
			changed = true
		}
	}
	return changed
}

func clampOOMScoreAdj(process map[string]any) bool {
	value, ok := process["oomScoreAdj"].(json.Number)
	if !ok {
		return false
	}
	if n, err := value.Int64(); err != nil || n >= 0 {
		return false
	}
	process["oomScoreAdj"] = json.Number("0")
	return true
}
