package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ebv1 "daq.io/eventbuilder/operator/api/v1alpha1"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Handler serves the console from c (the operator's cache) and the rates
// history keeps: Prefix lists the runs, Prefix+"runs/NAMESPACE/NAME" shows
// one. Read-only: it answers GET alone. Authentication and authorisation
// wrap it where it is served.
func Handler(c client.Reader, history *History, prom *Prometheus) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "the console is read-only: GET only", http.StatusMethodNotAllowed)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, Prefix)
		page, status, err := render(r, c, history, prom, path)
		if err != nil {
			http.Error(w, err.Error(), status)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(page)
	})
}

func render(r *http.Request, c client.Reader, history *History, prom *Prometheus, path string) ([]byte, int, error) {
	ctx := r.Context()
	if path == "" {
		var runs ebv1.EventBuilderRunList
		if err := c.List(ctx, &runs); err != nil {
			return nil, http.StatusInternalServerError, err
		}
		return pageOrError(IndexPage(runs.Items))
	}
	parts := strings.Split(path, "/")
	if len(parts) != 3 || parts[0] != "runs" || parts[1] == "" || parts[2] == "" {
		return nil, http.StatusNotFound, errNotFound(path)
	}
	var run ebv1.EventBuilderRun
	if err := c.Get(ctx, types.NamespacedName{Namespace: parts[1], Name: parts[2]}, &run); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusNotFound, err
		}
		return nil, http.StatusInternalServerError, err
	}
	var fabric *ebv1.Fabric
	var onFabric []ebv1.EventBuilderRun
	if ref := run.Spec.FabricRef; ref != nil {
		fabric = &ebv1.Fabric{}
		if err := c.Get(ctx, types.NamespacedName{Name: ref.Name}, fabric); err != nil {
			fabric = nil // the run's page stands without its map
		} else {
			var runs ebv1.EventBuilderRunList
			if err := c.List(ctx, &runs); err == nil {
				for _, other := range runs.Items {
					if other.Spec.FabricRef != nil && other.Spec.FabricRef.Name == ref.Name {
						onFabric = append(onFabric, other)
					}
				}
			}
		}
	}
	key := types.NamespacedName{Namespace: run.Namespace, Name: run.Name}
	view := RunView{Run: &run, Failovers: history.Failovers(key), Fabric: fabric, OnFabric: onFabric, Now: time.Now()}
	view.Rates, view.RateSource = rates(ctx, history, prom, key, view.Now)
	return pageOrError(RunPage(view))
}

// rates is the run's event rate over the window and where it comes from:
// Prometheus when one is configured and answers, else (and saying why)
// the operator's own samples of the run's status.
func rates(ctx context.Context, history *History, prom *Prometheus, run types.NamespacedName, now time.Time) ([]RatePoint, string) {
	own := "the operator's samples of the run's status (every 5 s, since it started)"
	if prom == nil {
		return history.Rates(run), own
	}
	points, err := prom.Rates(ctx, run, now, Window)
	if err != nil {
		return history.Rates(run), fmt.Sprintf("%s: Prometheus at %s did not answer: %v", own, prom.URL, err)
	}
	return points, fmt.Sprintf("Prometheus at %s: %s", prom.URL, eventRateQuery(run))
}

// pageOrError is a rendered page (200), or why it could not be rendered (500).
func pageOrError(page []byte, err error) ([]byte, int, error) {
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	return page, http.StatusOK, nil
}

type errNotFound string

func (e errNotFound) Error() string {
	return "no such page " + Prefix + string(e) + ": " + Prefix + " lists the runs, " + Prefix + "runs/NAMESPACE/NAME shows one"
}
