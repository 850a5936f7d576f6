package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The slice's fresh seed is drawn from the tree under test, not from the
// clock: every change gets a sequence no one ran before, and the same tree
// draws the same seed, so a slice that fails in CI fails again on the
// developer's machine (a seed from the clock would make a change pass or
// fail by luck, and a failure could not be replayed by running the slice
// again).

// treeSeed is the fresh seed of the tree at root, and where it came from:
// in a git checkout (root its top level) the hash of HEAD's tree (and of the uncommitted changes
// to tracked files, if any: a dirty tree is another tree); elsewhere (a
// source archive) the hash of every source file's path and contents.
func treeSeed(root string) (seed uint64, from string, err error) {
	h := sha256.New()
	if tree, err := git(root, "rev-parse", "HEAD^{tree}"); err == nil && isTopLevel(root) {
		from = "git tree " + strings.TrimSpace(string(tree))
		h.Write(tree)
		diff, err := git(root, "diff", "HEAD", "--no-ext-diff", "--binary")
		if err != nil {
			return 0, "", fmt.Errorf("fresh seed: git diff HEAD in %s: %w", root, err)
		}
		if len(diff) > 0 {
			h.Write(diff)
			from += fmt.Sprintf(" with %d bytes of uncommitted changes", len(diff))
		}
	} else {
		n, err := hashSources(h, root)
		if err != nil {
			return 0, "", fmt.Errorf("fresh seed: not a git checkout (%v), and the sources cannot be read: %w", trimErr(err), err)
		}
		from = fmt.Sprintf("the checksum of %d source files (not a git checkout)", n)
	}
	return seedOf(h.Sum(nil)), from, nil
}

// isTopLevel reports whether root is its git checkout's top level: a
// source archive unpacked inside another checkout (its _output, a CI
// workspace) is not that checkout's tree.
func isTopLevel(root string) bool {
	top, err := git(root, "rev-parse", "--show-toplevel")
	if err != nil {
		return false
	}
	a, errA := filepath.EvalSymlinks(strings.TrimSpace(string(top)))
	b, errB := filepath.EvalSymlinks(root)
	return errA == nil && errB == nil && a == b
}

// seedOf folds a digest into a seed of the size freshSeed draws (nine
// digits: short enough to type in a replay command).
func seedOf(sum []byte) uint64 { return binary.LittleEndian.Uint64(sum[:8]) % 1_000_000_000 }

func git(root string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...) //nolint:gosec // Fixed git subcommands on the repository's root.
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func trimErr(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// hashSources writes the path and contents of every source file under
// root (Go files, go.mod, go.sum, scripts and the Makefile; _output, .git
// and testdata's generated runs left out) into h, in a fixed order, and
// returns how many.
func hashSources(h io.Writer, root string) (int, error) {
	var paths []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "_output" || name == ".git" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".sh") || name == "go.mod" || name == "go.sum" || name == "Makefile" {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	slices.Sort(paths)
	for _, p := range paths {
		data, err := os.ReadFile(p) //nolint:gosec // The tree's own sources.
		if err != nil {
			return 0, err
		}
		rel, _ := filepath.Rel(root, p)
		_, _ = h.Write([]byte(rel + "\x00"))
		_, _ = fmt.Fprintf(h, "%d\x00", len(data))
		_, _ = h.Write(data)
	}
	return len(paths), nil
}
