package harness

import (
	"net"
	"os"
	"path/filepath"
	"strings"
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

func TestRemoveDirLeftMounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root, as the harness's node does")
	}
	tmp := t.TempDir()
	// A volume outside the harness directory, as a killed harness's pod
	// may have left bind-mounted into a container root below it.
	src := filepath.Join(tmp, "elsewhere")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "e2e harness") // a space, escaped in /proc/self/mounts
	m := &mounts{}
	target := filepath.Join(dir, "pods", "p", "root", "var", "run", "secrets")
	if err := m.bind(src, target); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.unmountAll() })

	if err := RemoveDir(dir); err != nil {
		t.Fatalf("RemoveDir: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dir, err)
	}
	if _, err := os.Stat(filepath.Join(src, "keep")); err != nil {
		t.Errorf("removing the harness directory reached through the mount into %s: %v", src, err)
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), filepath.Join(tmp, "e2e")) {
		t.Errorf("a mount below %s is left", dir)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b":          "/a/b",
		`/a\040b`:       "/a b",
		`/a\011b\134c`:  "/a\tb\\c",
		`/trailing\04`:  `/trailing\04`,
		`/not\999octal`: `/not\999octal`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q): want %q, got %q", in, want, got)
		}
	}
}
