package v1beta1

// Hub marks Widget as the version other versions convert to and from
// (controller-runtime's conversion.Hub).
func (*Widget) Hub() {}

// Hub marks WidgetKey as the version other versions convert to and from
// (controller-runtime's conversion.Hub).
func (*WidgetKey) Hub() {}
