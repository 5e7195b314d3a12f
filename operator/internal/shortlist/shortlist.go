// Package shortlist keeps lists and texts short inside messages that people
// read and that Events carry: events.k8s.io refuses notes over 1024
// characters, so a list names a few items and then says how many more there
// are, and a long text is clipped.
package shortlist

import (
	"fmt"
	"strings"
)

// Most is how many items a list names before "and N more".
const Most = 5

// Join names at most Most items, separated by sep, then "and N more".
func Join[T any](items []T, sep string, name func(T) string) string {
	var b strings.Builder
	for i, item := range items {
		if i > 0 {
			b.WriteString(sep)
		}
		if i == Most {
			fmt.Fprintf(&b, "and %d more", len(items)-i)
			break
		}
		b.WriteString(name(item))
	}
	return b.String()
}

// Clip cuts text longer than most bytes to its first most, then "...".
func Clip(text string, most int) string {
	if len(text) > most {
		return text[:most] + "..."
	}
	return text
}
