package fakes

import (
	"context"
	"reflect"
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kube is a crossplane-runtime test.MockClient with an object store. Get
// fills obj with a copy of the stored object of obj's Go type, namespace and
// name, and returns a NotFound error naming the Go type when there is none.
// Create and Update succeed and record a copy of the object (for example the
// ProviderConfigUsages a resolver applies). Every other call is the
// MockClient's: a test may replace any Mock function, including these.
type Kube struct {
	*test.MockClient

	// Objects are what Get serves. Set them before the first call.
	Objects []client.Object
	// GetErr makes Get fail, for objects of a Go type in it, with that
	// type's error. Set it before the first call.
	GetErr map[reflect.Type]error

	mu      sync.Mutex
	applied []client.Object
}

// NewKube returns a Kube that serves objs.
func NewKube(objs ...client.Object) *Kube {
	k := &Kube{Objects: objs, GetErr: map[reflect.Type]error{}}
	k.MockClient = &test.MockClient{
		MockGet: func(_ context.Context, key client.ObjectKey, obj client.Object) error {
			if err := k.GetErr[reflect.TypeOf(obj)]; err != nil {
				return err
			}
			for _, o := range k.Objects {
				if reflect.TypeOf(o) == reflect.TypeOf(obj) && o.GetName() == key.Name && o.GetNamespace() == key.Namespace {
					reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
					return nil
				}
			}
			return kerrors.NewNotFound(schema.GroupResource{Resource: reflect.TypeOf(obj).Elem().Name()}, key.Name)
		},
		MockCreate: func(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
			k.apply(obj)
			return nil
		},
		MockUpdate: func(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
			k.apply(obj)
			return nil
		},
	}
	return k
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
