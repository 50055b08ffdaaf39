package harness

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestMountsShareASocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root, as the harness's node does")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "volumes", "changelogs")
	if err := writeVolume(src, nil, true); err != nil {
		t.Fatal(err)
	}
	m := &mounts{}
	t.Cleanup(func() { _ = m.unmountAll() })
	provider, sidecar := filepath.Join(dir, "root"), filepath.Join(dir, "containers", "sidecar", "root")
	for _, root := range []string{provider, sidecar} {
		if err := m.bind(src, filepath.Join(root, "var", "run", "changelogs")); err != nil {
			t.Fatal(err)
		}
	}

	// The sidecar listens in its root; the provider connects in its own.
	l, err := net.Listen("unix", filepath.Join(sidecar, "var", "run", "changelogs", "changelogs.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("entry\n"))
		_ = c.Close()
	}()
	c, err := net.Dial("unix", filepath.Join(provider, "var", "run", "changelogs", "changelogs.sock"))
	if err != nil {
		t.Fatalf("The provider's container cannot reach the socket the sidecar created on their shared emptyDir: %v", err)
	}
	b := make([]byte, 6)
	if _, err := c.Read(b); err != nil || string(b) != "entry\n" {
		t.Errorf("read %q, %v; want \"entry\\n\"", b, err)
	}
	_ = c.Close()

	// Making the provider's root again unmounts the volume there first, so
	// removing the root leaves the shared volume's files alone.
	if err := m.unmountUnder(provider); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(provider); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(src, "changelogs.sock")); err != nil {
		t.Errorf("The shared volume lost the sidecar's socket when the provider's root was removed: %v", err)
	}
	if err := m.unmountAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sidecar, "var", "run", "changelogs", "changelogs.sock")); !os.IsNotExist(err) {
		t.Errorf("After unmountAll the sidecar's root still shows the volume (stat: %v)", err)
	}
}
