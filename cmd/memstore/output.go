package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"
)

// The output formats of --output. JSON shows objects whole, as the API
// sent them, so ids and one-time secrets can be copied or piped to jq;
// YAML is the same for reading; a table is a line per object for people.
const (
	outputJSON  = "json"
	outputTable = "table"
	outputYAML  = "yaml"
)

// outputFlags are --output and -q: how a verb prints what it got.
type outputFlags struct {
	// quiet prints only ids (-q), for shell scripts.
	quiet bool
	// output is --output: json, table, yaml, or "" for the default.
	output string
}

// registerOutput adds --output to fs.
func (o *outputFlags) registerOutput(fs *pflag.FlagSet) {
	fs.StringVar(&o.output, "output", "", "output format: json, table or yaml (default: table on a terminal, json otherwise)")
}

// registerQuiet adds -q to fs.
func (o *outputFlags) registerQuiet(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print only the id (of each object, one per line), for scripts")
}

// format is the chosen output format: --output, else a table when a person
// reads stdout (a terminal) and JSON when a program does.
func (o outputFlags) format(stdout io.Writer) (string, error) {
	switch o.output {
	case outputJSON, outputTable, outputYAML:
		return o.output, nil
	case "":
		if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return outputTable, nil
		}
		return outputJSON, nil
	}
	return "", usageError{Err: fmt.Errorf("--output %q: use json, table or yaml", o.output)}
}

// print writes v, an API object or a list of them, to stdout in the output
// format; with -q it writes only the id of the object, or of each object
// of a list, one per line.
func (o outputFlags) print(stdout io.Writer, v any) error {
	if o.quiet {
		return printIDs(stdout, v)
	}
	format, err := o.format(stdout)
	if err != nil {
		return err
	}
	switch format {
	case outputTable:
		return printTable(stdout, v)
	case outputYAML:
		return printYAML(stdout, v)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printContent writes a memory's content as it is, and on a terminal
// ends it with a newline if it has none, so the shell's prompt does not
// run on from its last line. Piped, the bytes are exactly the memory's:
// `memory get … > file` round-trips.
func printContent(stdout io.Writer, content string) error {
	if _, err := io.WriteString(stdout, content); err != nil {
		return err
	}
	if f, ok := stdout.(*os.File); ok && content != "" && !strings.HasSuffix(content, "\n") && term.IsTerminal(int(f.Fd())) {
		_, err := io.WriteString(stdout, "\n")
		return err
	}
	return nil
}

// objects turns v into the JSON objects the API would send: one, or each
// of a list.
func objects(v any) ([]map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var items []map[string]any
	if b[0] == '[' {
		err = json.Unmarshal(b, &items)
	} else {
		var one map[string]any
		err = json.Unmarshal(b, &one)
		items = append(items, one)
	}
	return items, err
}

func printIDs(w io.Writer, v any) error {
	items, err := objects(v)
	if err != nil {
		return err
	}
	for _, it := range items {
		id, ok := it["id"].(string)
		if !ok {
			id, _ = it["path"].(string) // a memory_prefix in a listing
		}
		if _, err := fmt.Fprintln(w, id); err != nil {
			return err
		}
	}
	return nil
}

func printYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(tree); err != nil {
		return err
	}
	return enc.Close()
}

// tableColumns are the fields a table shows, in this order, when at least
// one object has them: what tells objects apart, not everything they hold
// (JSON and YAML show that).
var tableColumns = []string{"id", "path", "name", "display_name", "latest_version_id", "model", "title", "description", "status", "operation", "author", "memory_id", "session_id",
	"environment_id", "content_size_bytes", "created_at", "updated_at", "archived_at"}

// maxCell is the widest a table cell gets before it is cut with "…".
const maxCell = 48

// printTable writes objects as a table: a header and a line per object.
// An object with none of the table's columns (a deletion's answer) shows
// its id and type.
func printTable(w io.Writer, v any) error {
	items, err := objects(v)
	if err != nil {
		return err
	}
	for _, it := range items {
		summarize(it)
	}
	var cols []string
	for _, c := range tableColumns {
		if slices.ContainsFunc(items, func(it map[string]any) bool { _, ok := it[c]; return ok }) {
			cols = append(cols, c)
		}
	}
	if len(cols) <= 1 {
		cols = append(cols, "type")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, it := range items {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = cell(toSecond(c, it[c]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// summarize gives an object the table's short forms of nested values:
// "author" for who wrote a version (created_by), and an agent's model by
// its id alone.
func summarize(it map[string]any) {
	if by, ok := it["created_by"].(map[string]any); ok {
		author, _ := by["type"].(string)
		for _, k := range []string{"session_id", "api_key_id", "user_id"} {
			if id, ok := by[k].(string); ok && id != "" {
				author = id
			}
		}
		it["author"] = author
	}
	if m, ok := it["model"].(map[string]any); ok {
		it["model"] = m["id"]
	}
}

// toSecond shows a time column (…_at) to the second: a table is read by a
// person, for whom nanoseconds are noise (JSON and YAML keep them).
func toSecond(col string, v any) any {
	s, ok := v.(string)
	if !ok || !strings.HasSuffix(col, "_at") {
		return v
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return v
	}
	return t.Format(time.RFC3339)
}

// cell is one value on one line of a table: "-" for nothing, nested
// values as compact JSON, long ones cut.
func cell(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		s = v
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return "?"
		}
		s = strings.TrimSpace(buf.String())
	}
	s = strings.NewReplacer("\n", " ⏎ ", "\t", " ").Replace(s)
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
