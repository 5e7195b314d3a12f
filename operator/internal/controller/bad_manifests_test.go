package controller

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Manifests as people write them wrong (testdata/bad-manifests, each with
// an "# expect:" line): the API server refuses every one, as kubectl apply
// would send it (strict field validation), with an error that names the
// field. Nothing is created.
func TestBadManifestsAreRefusedNamingTheField(t *testing.T) {
	requireEnvtest(t)
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join("testdata", "bad-manifests", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("the corpus: %d files, %v", len(files), err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := expectation(raw)
			if want == "" {
				t.Fatalf("%s has no \"# expect:\" line", file)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
				t.Fatalf("parse %s: %v", file, err)
			}
			if obj.GetKind() == "EventBuilderRun" {
				obj.SetNamespace(ns)
			}
			err = k8s.Create(context.Background(), obj, client.FieldValidation("Strict"))
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("created; want it refused with an error naming %q", want)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not say %q: %v", want, err)
			}
			t.Log(err)
		})
	}
}

// expectation is the text after "# expect: " in a manifest.
func expectation(raw []byte) string {
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "# expect: "); ok {
			return rest
		}
	}
	return ""
}
