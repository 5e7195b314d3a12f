package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestPatchSpec(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		wantChanged bool
		want        string
	}{
		{
			name:        "bundle spec loses CAP_SYS_RESOURCE in every set, big numbers stay exact",
			in:          `{"process":{"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE"],"effective":["CAP_SYS_RESOURCE"]},"rlimits":[{"hard":1048576}]}}`,
			wantChanged: true,
			want:        `{"process":{"capabilities":{"bounding":["CAP_CHOWN"],"effective":[]},"rlimits":[{"hard":1048576}]}}`,
		},
		{
			name:        "exec process file has capabilities at the top",
			in:          `{"capabilities":{"permitted":["CAP_SYS_RESOURCE","CAP_NET_ADMIN"]}}`,
			wantChanged: true,
			want:        `{"capabilities":{"permitted":["CAP_NET_ADMIN"]}}`,
		},
		{
			name:        "negative oomScoreAdj is raised to 0 together with the capability drop",
			in:          `{"process":{"oomScoreAdj":-998,"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}}`,
			wantChanged: true,
			want:        `{"process":{"oomScoreAdj":0,"capabilities":{"bounding":[]}}}`,
		},
		{
			name:        "nothing to change",
			in:          `{"process":{"oomScoreAdj":100,"capabilities":{"bounding":["CAP_CHOWN"]}}}`,
			wantChanged: false,
			want:        `{"process":{"oomScoreAdj":100,"capabilities":{"bounding":["CAP_CHOWN"]}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := patchSpec([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if changed != tt.wantChanged {
				t.Fatalf("changed = %v, want %v", changed, tt.wantChanged)
			}
			var gotDoc, wantDoc any
			if err := json.Unmarshal(got, &gotDoc); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(tt.want), &wantDoc)
			if !reflect.DeepEqual(gotDoc, wantDoc) {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSpecFiles(t *testing.T) {
	args := []string{"--root", "/r", "create", "--bundle", "/b", "id"}
	if got := specFiles(args); !reflect.DeepEqual(got, []string{"/b/config.json"}) {
		t.Fatalf("create: %v", got)
	}
	args = []string{"exec", "--process=/tmp/p.json", "--detach", "id"}
	if got := specFiles(args); !reflect.DeepEqual(got, []string{"/tmp/p.json"}) {
		t.Fatalf("exec: %v", got)
	}
}
