// Package convert runs upjet's API version conversions
// (github.com/crossplane/upjet/v2/pkg/config/conversion) between two versions
// of a managed resource kind. upjet's own runner is part of its Terraform
// machinery, so this package runs the Terraform-free conversions in the same
// order upjet does: prioritized managed conversions (an identity copy), then
// the paved conversions on the objects' unstructured form, then the other
// managed conversions.
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
// hubGVK: the body of a spoke's ConvertTo.
func ToHub[H client.Object](src client.Object, srcGVK schema.GroupVersionKind, hub ctrlconversion.Hub, hubGVK schema.GroupVersionKind, cs []conversion.Conversion) error {
	dst, ok := hub.(H)
	if !ok {
		return errors.Errorf("cannot convert a %s %s to %T", srcGVK.Version, srcGVK.Kind, hub)
	}
	s, d := Objects(src, srcGVK, dst, hubGVK)
	return Run(s, d, cs)
}

// FromHub converts hub, which must be an H of hubGVK, into the spoke dst, of
// dstGVK: the body of a spoke's ConvertFrom.
func FromHub[H client.Object](hub ctrlconversion.Hub, hubGVK schema.GroupVersionKind, dst client.Object, dstGVK schema.GroupVersionKind, cs []conversion.Conversion) error {
	src, ok := hub.(H)
	if !ok {
		return errors.Errorf("cannot convert %T to a %s %s", hub, dstGVK.Version, dstGVK.Kind)
	}
	s, d := Objects(client.Object(src), hubGVK, dst, dstGVK)
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

// RemoveAnnotation returns a managed conversion from sourceVersion to
// targetVersion that removes the annotation in which upjet's newly introduced
// field conversion keeps the fields the source version lacks, once they are
// restored: the target version has them as fields.
func RemoveAnnotation(sourceVersion, targetVersion string) conversion.Conversion {
	return conversion.NewCustomConverter(sourceVersion, targetVersion, func(_, target resource.Managed) error {
		a := target.GetAnnotations()
		if _, ok := a[conversion.AnnotationKey]; !ok {
			return nil
		}
		delete(a, conversion.AnnotationKey)
		if len(a) == 0 {
			a = nil
		}
		target.SetAnnotations(a)
		return nil
	})
}
