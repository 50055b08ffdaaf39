package fakes_test

import (
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/widgetco/crossplane-widget/provider/internal/clients"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
)

// The fakes stand in for these interfaces. Package fakes cannot say so
// itself without importing clients.
var (
	_ client.Client    = fakes.NewKube()
	_ clients.Delayer  = &fakes.Delayer{}
	_ clients.Follower = &fakes.Follower[*clients.Connection]{}
	_ event.Recorder   = &fakes.Recorder{}
)
