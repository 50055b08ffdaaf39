//go:build !unix

package harness

// LockDir does nothing where flock(2) does not exist.
func LockDir(string) (func(), error) { return func() {}, nil }
