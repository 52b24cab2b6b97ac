package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/memstore/memstore/client"
)

// The operator verbs (env, agent, store, memory, session) talk HTTP to a
// running server through package client, as any other user of the API
// would. This file holds what they share: the connection flags, nested
// verb dispatch (which worker poll | run use too), and output.

// verb is one action of a noun command ("env create").
type verb struct {
	summary string
	run     func(ctx context.Context, cli *cliContext, args []string) error
	// sub, when set, makes this verb a group of its own ("env key create").
	sub map[string]verb
}

// cliContext is what a verb runs with.
type cliContext struct {
	name   string // "env create", for flag errors and usage
	stdout io.Writer
	stderr io.Writer
	conn   connFlags
	// quiet prints only ids (-q), for shell scripts.
	quiet bool
}

// connFlags are the flags every API verb takes.
type connFlags struct {
	baseURL string
	apiKey  string
	dataDir string
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.baseURL, "base-url", envOr("MEMSTORE_BASE_URL", "http://127.0.0.1:8080"), "server base URL (env MEMSTORE_BASE_URL)")
	// No default from the environment: a usage text would print the key.
	fs.StringVar(&c.apiKey, "api-key", "", "API key (default: env MEMSTORE_API_KEY, then MEMSTORE_ADMIN_KEY, then <data>/admin.key)")
	fs.StringVar(&c.dataDir, "data", envOr("MEMSTORE_DATA", "./memstore-data"), "data folder of a local server, where admin.key is read from when no key is given (env MEMSTORE_DATA)")
}

// key resolves the API key: the flag, MEMSTORE_API_KEY, MEMSTORE_ADMIN_KEY,
// then the admin.key a local `memstore serve` wrote.
func (c *connFlags) key() (string, error) {
	if k := cmp.Or(c.apiKey, os.Getenv("MEMSTORE_API_KEY"), os.Getenv("MEMSTORE_ADMIN_KEY")); k != "" {
		return k, nil
	}
	path := filepath.Join(c.dataDir, "admin.key")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no API key: pass --api-key or set MEMSTORE_API_KEY (no %s to fall back on; `memstore serve` writes it on first start, see --data)", path)
	}
	if err != nil {
		return "", fmt.Errorf("read the API key from %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// client builds the API client of a verb.
func (cli *cliContext) client() (*client.Client, error) {
	key, err := cli.conn.key()
	if err != nil {
		return nil, err
	}
	return client.New(cli.conn.baseURL, client.WithAPIKey(key))
}

// flags makes a verb's flag set with the connection flags registered.
func (cli *cliContext) flags() *flag.FlagSet {
	fs := newFlagSet(cli.name, cli.stderr)
	cli.conn.register(fs)
	fs.BoolVar(&cli.quiet, "q", false, "print only the id (of each object, one per line), for scripts")
	return fs
}

// parse parses args, allowing flags after positional arguments
// ("env get env_… --base-url …"), and checks the positional count.
func (cli *cliContext) parse(fs *flag.FlagSet, args []string, usage string, minArgs, maxArgs int) ([]string, error) {
	fs.Usage = func() {
		fmt.Fprintf(cli.stderr, "Usage: memstore %s %s\n\nFlags:\n", cli.name, usage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		fmt.Fprintf(cli.stderr, "memstore %s: wrong number of arguments\n", cli.name)
		fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

// connect parses a verb's arguments (see parse) and builds its API client:
// the first steps of every verb that calls the server.
func (cli *cliContext) connect(fs *flag.FlagSet, args []string, usage string, minArgs, maxArgs int) ([]string, *client.Client, error) {
	pos, err := cli.parse(fs, args, usage, minArgs, maxArgs)
	if err != nil {
		return nil, nil, err
	}
	c, err := cli.client()
	return pos, c, err
}

// idVerb is a verb whose only argument is an object's id (what names it
// in the usage line) and that prints what call returns for it: get,
// archive, delete. call is usually a method expression such as
// (*client.Client).GetEnvironment.
func idVerb[T any](summary, what string, call func(*client.Client, context.Context, string) (T, error)) verb {
	return verb{summary: summary, run: func(ctx context.Context, cli *cliContext, args []string) error {
		pos, c, err := cli.connect(cli.flags(), args, "[flags] <"+what+">", 1, 1)
		if err != nil {
			return err
		}
		v, err := call(c, ctx, pos[0])
		if err != nil {
			return err
		}
		return cli.print(v)
	}}
}

// listVerb is the list verb of a kind of object whose only filter is
// --archived: it prints every page of list as one JSON array.
func listVerb[T any](summary, what string, list func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[T, error]) verb {
	return verb{summary: summary, run: func(ctx context.Context, cli *cliContext, args []string) error {
		fs := cli.flags()
		archived := fs.Bool("archived", false, "include archived "+what)
		_, c, err := cli.connect(fs, args, "[flags]", 0, 0)
		if err != nil {
			return err
		}
		return printAll(cli, list(c, ctx, *archived))
	}}
}

// describedCreate is the create verb of an object made of a name, an
// optional description and metadata: environments and memory stores.
// desc is nil when --description is not given.
func describedCreate[T any](summary, descUsage string, create func(ctx context.Context, c *client.Client, name string, desc *string, md map[string]string) (T, error)) verb {
	return verb{summary: summary, run: func(ctx context.Context, cli *cliContext, args []string) error {
		fs := cli.flags()
		desc := fs.String("description", "", descUsage)
		md := kvFlag{}
		fs.Var(md, "metadata", "metadata key=value (repeatable)")
		pos, c, err := cli.connect(fs, args, "[flags] <name>", 1, 1)
		if err != nil {
			return err
		}
		if *desc == "" {
			desc = nil
		}
		v, err := create(ctx, c, pos[0], desc, md)
		if err != nil {
			return err
		}
		return cli.print(v)
	}}
}

// noun makes a top-level command out of verbs.
func noun(name string, verbs map[string]verb) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return dispatch(ctx, name, verbs, args, stdout, stderr)
	}
}

func dispatch(ctx context.Context, name string, verbs map[string]verb, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		verbUsage(stderr, name, verbs)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	v, ok := verbs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "memstore %s: unknown verb %q\n\n", name, args[0])
		verbUsage(stderr, name, verbs)
		return errUsage
	}
	full := name + " " + args[0]
	if v.sub != nil {
		return dispatch(ctx, full, v.sub, args[1:], stdout, stderr)
	}
	return v.run(ctx, &cliContext{name: full, stdout: stdout, stderr: stderr}, args[1:])
}

func verbUsage(w io.Writer, name string, verbs map[string]verb) {
	fmt.Fprintf(w, "Usage: memstore %s <verb> [flags] [arguments]\n\nVerbs:\n", name)
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, verbs[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'memstore %s <verb> -h' for a verb's flags.\n", name)
}

// printAll prints every item of a listing as one JSON array (or, with -q,
// their ids), after the last page arrived: a listing that fails half-way
// prints nothing but the error.
func printAll[T any](cli *cliContext, seq iter.Seq2[T, error]) error {
	out := []T{}
	for v, err := range seq {
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	return cli.print(out)
}

// print writes v as indented JSON: objects are shown whole, so ids and
// one-time secrets can be copied or piped to jq. With -q it writes only the
// id of the object, or of each object of a list, one per line.
func (cli *cliContext) print(v any) error {
	if !cli.quiet {
		enc := json.NewEncoder(cli.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var items []map[string]any
	if b[0] == '[' {
		err = json.Unmarshal(b, &items)
	} else {
		var one map[string]any
		err = json.Unmarshal(b, &one)
		items = append(items, one)
	}
	if err != nil {
		return err
	}
	for _, it := range items {
		id, ok := it["id"].(string)
		if !ok {
			id, _ = it["path"].(string) // a memory_prefix in a listing
		}
		if _, err := fmt.Fprintln(cli.stdout, id); err != nil {
			return err
		}
	}
	return nil
}

// kvFlag collects repeated key=value flags (--metadata team=infra).
type kvFlag map[string]string

func (m kvFlag) String() string { return "" }

func (m kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	m[k] = v
	return nil
}

// listFlag collects a repeated flag's values in order.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// textArg reads a text argument: "-" means standard input, @path a file,
// anything else is the text itself.
func textArg(arg string, stdin io.Reader) (string, error) {
	switch {
	case arg == "-":
		b, err := io.ReadAll(stdin)
		return string(b), err
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is said once, as it was given
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", arg, err)
		}
		return string(b), nil
	}
	return arg, nil
}

// stdin is where "-" arguments read from; tests replace it.
var stdin io.Reader = os.Stdin
