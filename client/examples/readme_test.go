package examples_test

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the README's ```go blocks, each without the indentation
// of its fence (a block inside a list item is indented).
func goBlocks(readme string) []string {
	var blocks []string
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimLeft(lines[i], " ")
		if fence != "```go" {
			continue
		}
		indent := lines[i][:len(lines[i])-len(fence)]
		var b strings.Builder
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.WriteString(strings.TrimPrefix(lines[i], indent))
			b.WriteByte('\n')
		}
		blocks = append(blocks, b.String())
	}
	return blocks
}

// TestREADMEGo compiles and vets every ```go block of the README and of
// docs/*.md as a program of its own, in a module outside this one that
// requires it (replaced by this checkout), as a user's program would; and
// checks that each is gofmt-formatted. A block must be a whole program (package main),
// so that a user can paste it.
func TestREADMEGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		text, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, goBlocks(string(text))...)
	}
	if len(blocks) == 0 {
		t.Fatal("neither the README nor docs/ has a ```go block")
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := fmt.Sprintf("module readme\n\ngo 1.26\n\nrequire github.com/geoevent/geoevent v0.0.0\n\nreplace github.com/geoevent/geoevent => %s\n", root)
	for _, f := range []struct {
		name string
		data []byte
	}{{"go.mod", []byte(mod)}, {"go.sum", sum}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var pkgs []string
	for i, src := range blocks {
		if !strings.HasPrefix(src, "package main\n") {
			t.Errorf("Go block %d of the README and docs/ is not a whole program (package main):\n%s", i+1, src)
			continue
		}
		if formatted, err := format.Source([]byte(src)); err == nil && !bytes.Equal(formatted, []byte(src)) {
			t.Errorf("Go block %d of the README and docs/ is not gofmt-formatted; gofmt makes it:\n%s", i+1, formatted)
		}
		pkg := fmt.Sprintf("block%d", i+1)
		if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pkg, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+pkg)
	}
	// -mod=mod adds the module's own requirements (google/uuid, ...) to
	// go.mod from the module graph; GOPROXY=off keeps it to the module
	// cache, which this repository's build has filled.
	cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the README's Go blocks: %v\n%s", err, out)
	}
}

func TestGoBlocks(t *testing.T) {
	readme := "text\n```go\npackage main\n```\n- item:\n\n  ```go\n  package main\n\n  \tfunc f() {}\n  ```\n```\nnot go\n```\n"
	got := goBlocks(readme)
	want := []string{"package main\n", "package main\n\n\tfunc f() {}\n"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("goBlocks = %q, want %q", got, want)
	}
}
