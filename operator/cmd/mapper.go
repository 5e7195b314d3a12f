package main

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// sharedMapper is one REST mapper for every manager of runReplica: what it
// learnt of the API's groups stays with the process. A manager made afresh
// after its lease was lost to an API server that stalled (a worker's
// reboot loading the control plane, seen in the soak) then asks that server
// nothing before it campaigns; with a mapper of its own it discovered every
// group its controllers watch again, and took 4-12 s to lead while the
// runs waited. The mapper is lazy: made here, it asks nothing yet.
func sharedMapper(cfg *rest.Config) (func(*rest.Config, *http.Client) (meta.RESTMapper, error), error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil }, nil
}
