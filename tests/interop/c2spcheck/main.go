// Command c2spcheck checks a static export of an agentledger workspace log with Go's own
// golang.org/x/mod/sumdb/tlog and sumdb/note, code no one at agentledger wrote.
//
// It verifies DIR/checkpoint with the given verifier key, reads the tiles through a
// tlog.TileReader (tile paths as tlog.Tile.Path spells them, less the height element the
// C2SP layout drops), recomputes the root with tlog.TreeHash, checks that every record of
// the entry bundles hashes to its level-0 tile hash, proves and checks the inclusion of a
// sample of records (tlog.ProveRecord / CheckRecord), and, given an older export, the
// consistency of the two trees (tlog.ProveTree / CheckTree). It prints a JSON summary and
// exits 0 when everything checks, 1 otherwise.
package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

// tree is a checkpoint opened with the verifier key.
type tree struct {
	origin string
	size   int64
	root   tlog.Hash
}

func openCheckpoint(dir string, verifier note.Verifier) (tree, error) {
	data, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		return tree{}, err
	}
	n, err := note.Open(data, note.VerifierList(verifier))
	if err != nil {
		return tree{}, fmt.Errorf("checkpoint of %s: %w", dir, err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return tree{}, fmt.Errorf("checkpoint of %s: %d body lines, not a tlog-checkpoint", dir, len(lines)-1)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return tree{}, fmt.Errorf("checkpoint size: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return tree{}, fmt.Errorf("checkpoint root is not a base64 hash")
	}
	var root tlog.Hash
	copy(root[:], raw)
	return tree{origin: lines[0], size: size, root: root}, nil
}

// c2spPath is the C2SP tlog-tiles path of a tile: Go's sumdb path without its height.
func c2spPath(t tlog.Tile) string {
	return strings.Replace(t.Path(), fmt.Sprintf("tile/%d/", t.H), "tile/", 1)
}

// dirTiles reads tiles from an export folder.
type dirTiles struct{ dir string }

func (d dirTiles) Height() int { return height }

func (d dirTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := os.ReadFile(filepath.Join(d.dir, c2spPath(t)))
		if err != nil {
			return nil, err
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("%s: %d bytes, want %d", c2spPath(t), len(data), t.W*tlog.HashSize)
		}
		out[i] = data
	}
	return out, nil
}

func (d dirTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// records reads the entry bundle that holds record n of a tree of the given size.
func records(dir string, size, n int64) ([][]byte, int64, error) {
	t := tlog.TileForIndex(height, tlog.StoredHashIndex(0, n))
	t.L = -1 // the data tile, named "entries" in C2SP
	width := int64(1 << height)
	if end := (t.N + 1) << height; end > size {
		width = size - t.N<<height
	}
	t.W = int(width)
	path := strings.Replace(c2spPath(t), "/data/", "/entries/", 1)
	data, err := os.ReadFile(filepath.Join(dir, path))
	if err != nil {
		return nil, 0, err
	}
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, 0, fmt.Errorf("%s: truncated length", path)
		}
		length := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+length {
			return nil, 0, fmt.Errorf("%s: truncated record", path)
		}
		out = append(out, data[2:2+length])
		data = data[2+length:]
	}
	if int64(len(out)) != width {
		return nil, 0, fmt.Errorf("%s: %d records, want %d", path, len(out), width)
	}
	return out, t.N << height, nil
}

type summary struct {
	Origin      string `json:"origin"`
	Size        int64  `json:"size"`
	Root        string `json:"root"`
	Records     int    `json:"records_checked"`
	Proven      int    `json:"records_proven"`
	Consistency *int64 `json:"consistent_with_size,omitempty"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "c2spcheck: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	dir := flag.String("dir", "", "the export folder")
	vkey := flag.String("vkey", "", "the log's signed-note verifier key")
	old := flag.String("old", "", "an older export of the same log (checks consistency)")
	step := flag.Int64("every", 1, "prove the inclusion of every N-th record")
	flag.Parse()
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		fail("verifier key: %v", err)
	}
	t, err := openCheckpoint(*dir, verifier)
	if err != nil {
		fail("%v", err)
	}
	if t.origin != verifier.Name() {
		fail("origin %q is not the key's name %q", t.origin, verifier.Name())
	}
	reader := tlog.TileHashReader(tlog.Tree{N: t.size, Hash: t.root}, dirTiles{*dir})
	root, err := tlog.TreeHash(t.size, reader)
	if err != nil {
		fail("tree hash: %v", err)
	}
	if root != t.root {
		fail("tree hash %v is not the checkpoint's root %v", root, t.root)
	}
	out := summary{Origin: t.origin, Size: t.size, Root: root.String()}
	for start := int64(0); start < t.size; start += 1 << height {
		bundle, first, err := records(*dir, t.size, start)
		if err != nil {
			fail("%v", err)
		}
		indexes := make([]int64, len(bundle))
		for i := range bundle {
			indexes[i] = tlog.StoredHashIndex(0, first+int64(i))
		}
		hashes, err := reader.ReadHashes(indexes)
		if err != nil {
			fail("leaf hashes: %v", err)
		}
		for i, record := range bundle {
			n := first + int64(i)
			if tlog.RecordHash(record) != hashes[i] {
				fail("record %d does not hash to its level-0 tile hash", n)
			}
			var leaf map[string]any
			if json.Unmarshal(record, &leaf) != nil || leaf["run"] == nil || leaf["entry"] == nil {
				fail("record %d is not a log-leaf document", n)
			}
			out.Records++
			if n%*step != 0 && n != t.size-1 {
				continue
			}
			proof, err := tlog.ProveRecord(t.size, n, reader)
			if err != nil {
				fail("prove record %d: %v", n, err)
			}
			if err := tlog.CheckRecord(proof, t.size, t.root, n, tlog.RecordHash(record)); err != nil {
				fail("check record %d: %v", n, err)
			}
			out.Proven++
		}
	}
	if *old != "" {
		before, err := openCheckpoint(*old, verifier)
		if err != nil {
			fail("%v", err)
		}
		proof, err := tlog.ProveTree(t.size, before.size, reader)
		if err != nil {
			fail("prove tree %d -> %d: %v", before.size, t.size, err)
		}
		if err := tlog.CheckTree(proof, t.size, t.root, before.size, before.root); err != nil {
			fail("check tree %d -> %d: %v", before.size, t.size, err)
		}
		out.Consistency = &before.size
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("%v", err)
	}
}
