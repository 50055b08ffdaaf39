package harness

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name, link string
	typ        byte
	data       string
	size       int64
}

func layerOf(t *testing.T, es ...entry) *tar.Reader {
	t.Helper()
	buf := &bytes.Buffer{}
	tw := tar.NewWriter(buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.size > 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg && e.size == 0 {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil && !strings.Contains(err.Error(), "missed writing") {
		t.Fatal(err)
	}
	return tar.NewReader(bytes.NewReader(buf.Bytes()))
}

// TestUnpack: images come from packages anyone could push; unpacking one
// never writes outside the image's root.
func TestUnpack(t *testing.T) {
	cases := map[string]struct {
		reason  string
		entries []entry
		wantErr string
		want    map[string]string // path under root -> content ("" for a directory)
		outside string            // a file name that must not appear next to root
	}{
		"Files": {
			reason:  "Directories and files land under the root.",
			entries: []entry{{name: "usr/", typ: tar.TypeDir}, {name: "usr/bin/tool", typ: tar.TypeReg, data: "bin"}},
			want:    map[string]string{"usr/bin/tool": "bin"},
		},
		"DotDot": {
			reason:  "A name climbing out with .. is cleaned to stay under the root.",
			entries: []entry{{name: "../../escaped", typ: tar.TypeReg, data: "x"}},
			want:    map[string]string{"escaped": "x"},
			outside: "escaped",
		},
		"ThroughSymlink": {
			reason:  "A file written through a symlinked directory could land anywhere; it is refused.",
			entries: []entry{{name: "etc", typ: tar.TypeSymlink, link: "/tmp"}, {name: "etc/passwd", typ: tar.TypeReg, data: "x"}},
			wantErr: "goes through a symlink",
		},
		"HardLinkOut": {
			reason:  "A hard link's target is resolved under the root, never on the host.",
			entries: []entry{{name: "shadow", typ: tar.TypeLink, link: "../../../../etc/hostname"}},
			wantErr: "no such file",
		},
		"Whiteout": {
			reason:  "A whiteout removes what a lower layer wrote.",
			entries: []entry{{name: "a", typ: tar.TypeReg, data: "1"}, {name: ".wh.a", typ: tar.TypeReg}},
			want:    map[string]string{},
		},
		"TooLarge": {
			reason:  "A file larger than the harness unpacks is refused before it is written.",
			entries: []entry{{name: "huge", typ: tar.TypeReg, size: maxImageFile + 1}},
			wantErr: "larger than the harness unpacks",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "a", "b", "rootfs")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			err := unpack(layerOf(t, tc.entries...), root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nunpack(...): error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nunpack(...): %v", tc.reason, err)
			}
			for p, want := range tc.want {
				b, err := os.ReadFile(filepath.Join(root, p))
				if err != nil || string(b) != want {
					t.Errorf("%s\n%s = %q (%v), want %q", tc.reason, p, b, err, want)
				}
			}
			if _, err := os.Lstat(filepath.Join(root, "a")); name == "Whiteout" && err == nil {
				t.Errorf("%s\nthe whited-out file is still there", tc.reason)
			}
			if tc.outside != "" {
				for _, d := range []string{base, filepath.Join(base, "a"), filepath.Join(base, "a", "b")} {
					if _, err := os.Stat(filepath.Join(d, tc.outside)); err == nil {
						t.Errorf("%s\n%s was written outside the root, in %s", tc.reason, tc.outside, d)
					}
				}
			}
		})
	}
}
