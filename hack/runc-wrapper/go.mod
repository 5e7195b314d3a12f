module daq.io/eventbuilder/hack/runc-wrapper

go 1.25.0
