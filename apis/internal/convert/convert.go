// Package convert runs upjet's API version conversions
// (github.com/crossplane/upjet/v2/pkg/config/conversion) between two versions
// of a managed resource kind. upjet's own runner is part of its Terraform
// machinery, so this package runs the Terraform-free conversions in the same
// order upjet does: prioritized managed conversions (an identity copy), then
// the paved conversions on the objects' unstructured form, then the other
// managed conversions.
//
// upjet's field-conversions annotation (conversion.AnnotationKey) is where a
// spoke (v1alpha1) object keeps the hub (v1beta1) fields it has no field for.
// A hub object never needs it, and anyone who can write a hub object can
// write any annotation, so ToHub and FromHub treat it as belonging to the
// spoke alone: FromHub ignores the hub's copy and builds the spoke's from the
// hub's fields, ToHub never leaves it on the hub. A hub object's annotation
// therefore cannot make a conversion to the spoke fail: if it could, one
// object would fail every list and watch of the spoke version, cluster-wide.
package convert

import (
	"reflect"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/fieldpath"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	"github.com/crossplane/upjet/v2/pkg/config/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/conversion"
)

// Run converts src into dst, whose GroupVersionKinds must be set, with every
// conversion that applies to the pair of versions. Both must be managed
// resources (they are typed as client.Objects so that kinds whose managed
// resource methods are not generated yet still compile). dst is overwritten;
// src is not changed.
func Run(srcObj, dstObj client.Object, cs []conversion.Conversion) error {
	src, ok := srcObj.(resource.Managed)
	if !ok {
		return errors.Errorf("cannot convert %T: it is not a managed resource", srcObj)
	}
	dst, ok := dstObj.(resource.Managed)
	if !ok {
		return errors.Errorf("cannot convert to %T: it is not a managed resource", dstObj)
	}
	gvk := dst.GetObjectKind().GroupVersionKind()
	from := src.GetObjectKind().GroupVersionKind()
	if gvk.Empty() || from.Empty() {
		return errors.New("cannot convert: the source and the destination must have an apiVersion and kind")
	}
	for _, c := range cs {
		if pc, ok := c.(conversion.PrioritizedManagedConversion); ok {
			if _, err := pc.ConvertManaged(src, dst); err != nil {
				return errors.Wrapf(err, "cannot convert %s to %s", from.Version, gvk.Version)
			}
		}
	}

	su, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
	if err != nil {
		return errors.Wrap(err, "cannot convert the source to its unstructured form")
	}
	du, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dst)
	if err != nil {
		return errors.Wrap(err, "cannot convert the destination to its unstructured form")
	}
	sp, dp := fieldpath.Pave(su), fieldpath.Pave(du)
	for _, c := range cs {
		if pc, ok := c.(conversion.PavedConversion); ok {
			if _, err := pc.ConvertPaved(sp, dp); err != nil {
				return errors.Wrapf(err, "cannot convert %s to %s", from.Version, gvk.Version)
			}
		}
	}
	// Decode into a zero object: decoding into dst as it is would keep map
	// entries that the paved conversions removed.
	v := reflect.ValueOf(dst).Elem()
	v.Set(reflect.Zero(v.Type()))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dp.UnstructuredContent(), dst); err != nil {
		return errors.Wrapf(err, "cannot convert %s to %s", from.Version, gvk.Version)
	}
	dst.GetObjectKind().SetGroupVersionKind(gvk)

	for _, c := range cs {
		mc, ok := c.(conversion.ManagedConversion)
		if _, prioritized := c.(conversion.PrioritizedManagedConversion); !ok || prioritized {
			continue
		}
		if _, err := mc.ConvertManaged(src, dst); err != nil {
			return errors.Wrapf(err, "cannot convert %s to %s", from.Version, gvk.Version)
		}
	}
	return nil
}

// ToHub converts the spoke src, of srcGVK, into hub, which must be an H of
// hubGVK: the body of a spoke's ConvertTo. The hub never keeps the
// field-conversions annotation: the conversions in cs restore what it holds
// as fields (and must refuse what the hub's schema would refuse).
func ToHub[H client.Object](src client.Object, srcGVK schema.GroupVersionKind, hub ctrlconversion.Hub, hubGVK schema.GroupVersionKind, cs []conversion.Conversion) error {
	dst, ok := hub.(H)
	if !ok {
		return errors.Errorf("cannot convert a %s %s to %T", srcGVK.Version, srcGVK.Kind, hub)
	}
	s, d := Objects(src, srcGVK, dst, hubGVK)
	if err := Run(s, d, cs); err != nil {
		return err
	}
	removeAnnotation(d)
	return nil
}

// FromHub converts hub, which must be an H of hubGVK, into the spoke dst, of
// dstGVK: the body of a spoke's ConvertFrom. The hub's field-conversions
// annotation, which no conversion writes on a hub, is ignored: whatever its
// content, the conversion does not read it and does not fail on it.
func FromHub[H client.Object](hub ctrlconversion.Hub, hubGVK schema.GroupVersionKind, dst client.Object, dstGVK schema.GroupVersionKind, cs []conversion.Conversion) error {
	src, ok := hub.(H)
	if !ok {
		return errors.Errorf("cannot convert %T to a %s %s", hub, dstGVK.Version, dstGVK.Kind)
	}
	s, d := Objects(client.Object(src), hubGVK, dst, dstGVK)
	removeAnnotation(s)
	return Run(s, d, cs)
}

// Objects returns deep copies of src and dst with their GroupVersionKinds
// set, as Run needs them (objects decoded by a typed client or a conversion
// request may lack them).
func Objects[S, D client.Object](src S, srcGVK schema.GroupVersionKind, dst D, dstGVK schema.GroupVersionKind) (S, D) {
	s := src.DeepCopyObject().(S) //nolint:forcetypeassert // DeepCopyObject returns the same type.
	s.GetObjectKind().SetGroupVersionKind(srcGVK)
	dst.GetObjectKind().SetGroupVersionKind(dstGVK)
	return s, dst
}

// removeAnnotation removes upjet's field-conversions annotation from o, which
// must be a copy the caller owns.
func removeAnnotation(o client.Object) {
	a := o.GetAnnotations()
	if _, ok := a[conversion.AnnotationKey]; !ok {
		return
	}
	delete(a, conversion.AnnotationKey)
	if len(a) == 0 {
		a = nil
	}
	o.SetAnnotations(a)
}
