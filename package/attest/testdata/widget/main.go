// Command widget is a stand-in for the provider and function binaries: a
// small main package with one third-party dependency, built by the tests
// the way the package build compiles the real ones.
package main

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
)

var version = "unknown"

func main() {
	fmt.Println(version, cmp.Equal(1, 1))
}
