package mrsetup

import (
	"context"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/widgetco/crossplane-widget/apis"
)

const memoTTL = 5 * time.Minute

// memoStep is one thing a test does, at an offset from the start.
type memoStep struct {
	at time.Duration
	// publish publishes these details for the Widget through
	// crossplane-runtime's connection publisher on top of the memo.
	publish managed.ConnectionDetails
	// owner is the UID of the Widget that publishes (default uid-1).
	owner types.UID
	// get reads the Secret named get through the memo.
	get string
	// outOfBand changes the API server's copy of the connection Secret
	// directly: nil deletes it.
	outOfBand func(*corev1.Secret) *corev1.Secret
	// failPatch makes the API server refuse this step's patches.
	failPatch bool
	// want are the requests the API server sees in the step ("get",
	// "create", "patch"), and wantData the Secret's data afterwards as the
	// API server has it (nil: not checked).
	want     []string
	wantData map[string]string
}

func TestSecretMemo(t *testing.T) {
	a := managed.ConnectionDetails{"key": []byte("wks_1"), "widget": []byte("w")}
	b := managed.ConnectionDetails{"key": []byte("wks_2"), "widget": []byte("w")}
	cases := map[string]struct {
		reason string
		ttl    time.Duration
		// plain seeds a Secret named plain that is not a connection Secret.
		plain bool
		steps []memoStep
	}{
		"UnchangedWithinTTL": {
			reason: "Details published again within the TTL are compared with the Secret as this process wrote it: no request at all.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}, wantData: map[string]string{"key": "wks_1", "widget": "w"}},
				{at: time.Minute, publish: a},
				{at: memoTTL - time.Second, publish: a},
			},
		},
		"UnchangedAfterTTL": {
			reason: "Once the TTL is over the Secret is read again from the API server, as crossplane-runtime does on every reconcile.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				{at: memoTTL, publish: a, want: []string{"get"}},
				{at: memoTTL + time.Minute, publish: a},
			},
		},
		"Changed": {
			reason: "Changed details are written at once, without reading the Secret first; the write's answer is remembered.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				{at: time.Second, publish: b, want: []string{"patch"}, wantData: map[string]string{"key": "wks_2", "widget": "w"}},
				{at: 2 * time.Second, publish: b},
			},
		},
		"DeletedOutOfBand": {
			reason: "A Secret deleted by someone else is written again when the TTL is over (the next poll), not before.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				{at: time.Second, outOfBand: func(*corev1.Secret) *corev1.Secret { return nil }},
				{at: time.Minute, publish: a},
				{at: memoTTL, publish: a, want: []string{"get", "create"}, wantData: map[string]string{"key": "wks_1", "widget": "w"}},
			},
		},
		"EditedOutOfBand": {
			reason: "A Secret edited by someone else is repaired when the TTL is over.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				{at: time.Second, outOfBand: func(s *corev1.Secret) *corev1.Secret {
					s.Data["key"] = []byte("edited")
					return s
				}},
				{at: memoTTL, publish: a, want: []string{"get", "patch"}, wantData: map[string]string{"key": "wks_1", "widget": "w"}},
			},
		},
		"MadeAgain": {
			reason: "A resource deleted and made again under the same name has a new UID: the Secret remembered for the old one is not used, so the new one is not refused as not its own.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				// The garbage collector deletes the old one's Secret.
				{at: time.Second, outOfBand: func(*corev1.Secret) *corev1.Secret { return nil }},
				{at: 2 * time.Second, owner: "uid-2", publish: a, want: []string{"get", "create"}, wantData: map[string]string{"key": "wks_1", "widget": "w"}},
				{at: 3 * time.Second, owner: "uid-2", publish: a},
			},
		},
		"FailedWriteForgets": {
			reason: "After a failed write the Secret's state is unknown, so it is read from the API server (crossplane-runtime retries at once: its retry publishes what it read, not the details, an upstream quirk); the next publish writes the details.",
			ttl:    memoTTL,
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				{at: time.Second, publish: b, failPatch: true, want: []string{"patch", "get"}, wantData: map[string]string{"key": "wks_1", "widget": "w"}},
				{at: 2 * time.Second, publish: b, want: []string{"patch"}, wantData: map[string]string{"key": "wks_2", "widget": "w"}},
			},
		},
		"Disabled": {
			reason: "With no TTL (no poll interval) nothing is remembered.",
			steps: []memoStep{
				{publish: a, want: []string{"get", "create"}},
				{at: time.Second, publish: a, want: []string{"get"}},
			},
		},
		"NotAConnectionSecret": {
			reason: "Secrets of any other type are always read from the API server.",
			ttl:    memoTTL,
			plain:  true,
			steps: []memoStep{
				{get: "plain", want: []string{"get"}},
				{at: time.Second, get: "plain", want: []string{"get"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			owner := connectionOwner()
			var seed []client.Object
			if tc.plain {
				seed = append(seed, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: "plain"}, Data: map[string][]byte{"token": []byte("t")}})
			}
			var calls []string
			failPatch := false
			api := fake.NewClientBuilder().WithScheme(memoScheme(t)).WithObjects(seed...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
					calls = append(calls, "get")
					return c.Get(ctx, key, o, opts...)
				},
				Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
					calls = append(calls, "create")
					return c.Create(ctx, o, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
					calls = append(calls, "patch")
					if failPatch {
						return kerrors.NewServiceUnavailable("going away")
					}
					return c.Patch(ctx, o, p, opts...)
				},
			}).Build()
			start := time.Now()
			now := start
			memo := newSecretMemo(api, tc.ttl)
			memo.m.SetClock(func() time.Time { return now })
			pub := managed.NewAPILocalSecretPublisher(memo, memoScheme(t))
			secretKey := types.NamespacedName{Namespace: owner.GetNamespace(), Name: owner.GetWriteConnectionSecretToReference().Name}

			for i, s := range tc.steps {
				now = start.Add(s.at)
				calls, failPatch = nil, s.failPatch
				if s.outOfBand != nil {
					changeOutOfBand(t, api, secretKey, s.outOfBand)
					calls = nil
				}
				switch {
				case s.publish != nil:
					o := owner
					if s.owner != "" {
						o = connectionOwner()
						o.SetUID(s.owner)
					}
					if _, err := pub.PublishConnection(ctx, o, s.publish); err != nil && !s.failPatch {
						t.Errorf("%s\nstep %d: PublishConnection(...): %v", tc.reason, i, err)
					}
				case s.get != "":
					_ = memo.Get(ctx, types.NamespacedName{Namespace: owner.GetNamespace(), Name: s.get}, &corev1.Secret{})
				}
				if diff := cmp.Diff(s.want, calls); diff != "" {
					t.Errorf("%s\nstep %d: requests to the API server: -want, +got:\n%s", tc.reason, i, diff)
				}
				if s.wantData != nil {
					got := &corev1.Secret{}
					if err := api.Get(ctx, secretKey, got); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					data := map[string]string{}
					for k, v := range got.Data {
						data[k] = string(v)
					}
					if diff := cmp.Diff(s.wantData, data); diff != "" {
						t.Errorf("%s\nstep %d: the Secret's data: -want, +got:\n%s", tc.reason, i, diff)
					}
				}
			}
		})
	}
}

// TestSecretMemoCopies checks that what a Get returns is the caller's own:
// changing it changes nothing remembered.
func TestSecretMemoCopies(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "conn"}
	api := fake.NewClientBuilder().WithScheme(memoScheme(t)).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Type:       resource.SecretTypeConnection,
		Data:       map[string][]byte{"key": []byte("wks_1")},
	}).Build()
	memo := newSecretMemo(api, memoTTL)
	first := &corev1.Secret{}
	if err := memo.Get(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	first.Data["key"][0] = 'X'
	first.Data["other"] = []byte("y")
	second := &corev1.Secret{}
	if err := memo.Get(ctx, key, second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"key": []byte("wks_1")}, second.Data); diff != "" {
		t.Errorf("a remembered Secret changed with the copy a caller got: -want, +got:\n%s", diff)
	}
}

func connectionOwner() resource.LocalConnectionSecretOwner {
	w := widget(nil)
	w.SetUID("uid-1")
	w.SetWriteConnectionSecretToReference(&xpv2.LocalSecretReference{Name: "conn"})
	return w
}

func memoScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apis.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// changeOutOfBand changes the Secret key in c as someone else would: change
// returns the Secret to store, or nil to delete it.
func changeOutOfBand(t *testing.T, c client.Client, key types.NamespacedName, change func(*corev1.Secret) *corev1.Secret) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := c.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	next := change(s)
	var err error
	if next == nil {
		err = c.Delete(ctx, s)
	} else {
		err = c.Update(ctx, next)
	}
	if err != nil {
		t.Fatal(err)
	}
}
