package proc

import (
	"net"
	"os"
	"sync"
	"testing"
)

func TestBuildOnce(t *testing.T) {
	defer Clean()
	const pkg = "github.com/widgetco/crossplane-widget/widgetapi/cmd/widget-api"
	var wg sync.WaitGroup
	bins := make([]string, 3)
	for i := range bins {
		wg.Go(func() {
			bin, err := Build(t.Context(), pkg)
			if err != nil {
				t.Errorf("Build(%s): %v", pkg, err)
			}
			bins[i] = bin
		})
	}
	wg.Wait()
	if bins[0] == "" || bins[1] != bins[0] || bins[2] != bins[0] {
		t.Fatalf("Build(%s) three times at once: want one binary, got %q", pkg, bins)
	}
	if fi, err := os.Stat(bins[0]); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("Build(%s): %s is not an executable file (%v)", pkg, bins[0], err)
	}
	if _, err := Build(t.Context(), "github.com/widgetco/crossplane-widget/no/such/package"); err == nil {
		t.Errorf("Build of a package that does not exist: want an error, got none")
	}
	Clean()
	if _, err := os.Stat(bins[0]); !os.IsNotExist(err) {
		t.Errorf("Clean(): %s still exists (%v)", bins[0], err)
	}
}

func TestFreeAddr(t *testing.T) {
	a, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", a)
	if err != nil {
		t.Fatalf("FreeAddr() = %s, which cannot be bound: %v", a, err)
	}
	_ = l.Close()
}
