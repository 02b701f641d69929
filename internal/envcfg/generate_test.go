package envcfg

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the files generated from the table (go generate ./internal/envcfg)")

// The files the table generates, relative to this package.
var (
	commFile   = "comm_gen.go"
	configFile = filepath.Join("..", "..", "config_gen.go")
	docFile    = filepath.Join("..", "..", "docs", "settings.md")
)

// The reference's markers in docFile: what lies between them is
// generated.
const (
	docBegin = "<!-- BEGIN settings table: generated from internal/envcfg's Table by `go generate ./internal/envcfg`; do not edit -->\n"
	docEnd   = "<!-- END settings table -->\n"
)

const generatedHeader = "// Code generated from internal/envcfg's Table by `go generate ./internal/envcfg`; DO NOT EDIT.\n\n"

// goType is how the generated files spell t.
func goType(t reflect.Type) string {
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		return "[]byte"
	}
	return t.String()
}

// importBlock renders the import declaration of the packages the
// types of the table's fields come from: the standard library's, then
// the others.
func importBlock() string {
	var std, other []string
	for _, p := range imports() {
		if strings.Contains(strings.Split(p, "/")[0], ".") {
			other = append(other, fmt.Sprintf("\t%q\n", p))
		} else {
			std = append(std, fmt.Sprintf("\t%q\n", p))
		}
	}
	sep := ""
	if len(std) > 0 && len(other) > 0 {
		sep = "\n"
	}
	return "import (\n" + strings.Join(std, "") + sep + strings.Join(other, "") + ")\n\n"
}

// imports are the packages the types of the table's fields come from.
func imports() []string {
	var paths []string
	for _, s := range Table() {
		if p := s.Type().PkgPath(); p != "" && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// gofmt formats generated Go source, failing t on a syntax error.
func gofmt(t *testing.T, b []byte) []byte {
	out, err := format.Source(b)
	if err != nil {
		t.Fatalf("generated source does not parse: %v\n%s", err, b)
	}
	return out
}

// genComm renders comm_gen.go: the Var* constants and Comm.
func genComm(t *testing.T) []byte {
	var b bytes.Buffer
	b.WriteString(generatedHeader + "package envcfg\n\n" + importBlock())
	b.WriteString("// The variables of the table's settings, Var and the field's name;\n// ringtail's Env* constants name them.\nconst (\n")
	for _, s := range Table() {
		if d := s.Declared(); d.Env != "" {
			fmt.Fprintf(&b, "\tVar%s = %q // %s\n", d.Field, d.Env, d.Doc)
		}
	}
	b.WriteString(")\n\n// Comm is a communicator's configuration as the internal packages read\n" +
		"// it: ringtail.Config's fields (documented there), in its order, so\n// that each converts to the other.\ntype Comm struct {\n")
	for _, s := range Table() {
		fmt.Fprintf(&b, "\t%s %s\n", s.Declared().Field, goType(s.Type()))
	}
	b.WriteString("}\n")
	return gofmt(t, b.Bytes())
}

// genConfig renders the root package's config_gen.go: Config, with
// each field's comment.
func genConfig(t *testing.T) []byte {
	var b bytes.Buffer
	b.WriteString(generatedHeader + "package ringtail\n\n" + importBlock())
	b.WriteString("// Config configures a communicator. The zero value is not valid; start from\n" +
		"// ConfigFromEnv or fill Rank, WorldSize, MasterAddr, MasterPort and Secret.\n" +
		"// docs/settings.md lists the variables that set its fields.\ntype Config struct {\n")
	for _, s := range Table() {
		d := s.Declared()
		if d.GoDoc != "" {
			for line := range strings.SplitSeq(d.GoDoc, "\n") {
				b.WriteString(strings.TrimRight("\t// "+line, " ") + "\n")
			}
		}
		fmt.Fprintf(&b, "\t%s %s\n", d.Field, goType(s.Type()))
	}
	b.WriteString("}\n")
	return gofmt(t, b.Bytes())
}

// genReference renders the reference table of docs/settings.md.
func genReference() string {
	var b strings.Builder
	b.WriteString("| Variable | `Config` field | Default | What it sets |\n|---|---|---|---|\n")
	for _, s := range Table() {
		d := s.Declared()
		vars := "—"
		if d.Env != "" {
			vars = "`" + d.Env + "`"
			if d.Also != "" {
				vars += ", `" + d.Also + "`"
			}
		}
		def := "—"
		if v := s.DefaultString(); v != "" {
			def = "`" + v + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", vars, d.Field, def, strings.ReplaceAll(d.Doc, "|", `\|`))
	}
	return b.String()
}

// genDoc returns docs/settings.md (old) with the reference between its
// markers regenerated.
func genDoc(t *testing.T, old []byte) []byte {
	s := string(old)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", docFile, docBegin, docEnd)
	}
	return []byte(s[:i+len(docBegin)] + genReference() + s[j:])
}

// Comm, ringtail.Config and docs/settings.md's reference are the table's:
// run `go generate ./internal/envcfg` (this test with -update) after
// changing it.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{commFile, genComm(t)}, {configFile, genConfig(t)}, {docFile, genDoc(t, doc)}} {
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is not what the table generates: run go generate ./internal/envcfg", f.path)
		}
	}
}
