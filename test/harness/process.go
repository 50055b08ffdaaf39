package harness

import "github.com/widgetco/crossplane-widget/test/lib/proc"

// Command is the test library's proc.Command: what the harness runs.
type Command = proc.Command

// Process is the test library's proc.Process: every process the harness
// supervises.
type Process = proc.Process
