package widgetapi

import _ "embed"

// OpenAPI is the Widget API contract (openapi.yaml). The client and the
// reference server are tested against it.
//
//go:embed openapi.yaml
var OpenAPI []byte
