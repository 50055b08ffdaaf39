package fakes

import (
	"context"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/widgetco/crossplane-widget/apis"
)

// Kube is controller-runtime's in-memory fake client with the provider's
// and Kubernetes' kinds, serving the objects it was made with, and two
// hooks a test may replace: MockGet and MockCreate, which call the fake
// client until replaced. GetErr makes Get fail, for objects of a Go type in
// it, with that type's error. Every create and update that succeeds is
// recorded (for example the ProviderConfigUsages a resolver applies; see
// Applied).
type Kube struct {
	client.Client

	// GetErr makes Get fail for objects of a Go type in it. Set it before
	// the first call.
	GetErr map[reflect.Type]error
	// MockGet and MockCreate are Get and Create; a test may wrap or
	// replace them before the first call.
	MockGet    func(ctx context.Context, key client.ObjectKey, obj client.Object) error
	MockCreate func(ctx context.Context, obj client.Object, opts ...client.CreateOption) error

	mu      sync.Mutex
	applied []client.Object
}

// NewKube returns a Kube that serves objs.
func NewKube(objs ...client.Object) *Kube {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apis.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	k := &Kube{Client: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), GetErr: map[reflect.Type]error{}}
	k.MockGet = func(ctx context.Context, key client.ObjectKey, obj client.Object) error {
		if err := k.GetErr[reflect.TypeOf(obj)]; err != nil {
			return err
		}
		return k.Client.Get(ctx, key, obj)
	}
	k.MockCreate = func(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
		return k.Client.Create(ctx, obj, opts...)
	}
	return k
}

// Get calls MockGet.
func (k *Kube) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return k.MockGet(ctx, key, obj)
}

// Create calls MockCreate, and records obj when it succeeds.
func (k *Kube) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := k.MockCreate(ctx, obj, opts...); err != nil {
		return err
	}
	k.apply(obj)
	return nil
}

// Update updates obj in the fake client, and records it when that succeeds.
func (k *Kube) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := k.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	k.apply(obj)
	return nil
}

func (k *Kube) apply(obj client.Object) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.applied = append(k.applied, obj.DeepCopyObject().(client.Object))
}

// Applied returns copies of the objects created or updated so far, in the
// order of the calls.
func (k *Kube) Applied() []client.Object {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]client.Object(nil), k.applied...)
}
