package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memstore/memstore/api"
	"github.com/memstore/memstore/client"
)

// The operator verbs (env, agent, store, memory, session, chat) talk HTTP
// to a running server through package client, as any other user of the
// API would. This file holds what they share: the connection flags, the
// shapes of their common verbs, id completion, and arguments.

// cliContext is what the verbs of one noun run with: its streams and the
// flags every API verb takes.
type cliContext struct {
	streams
	conn connFlags
	outputFlags
	// keyFrom is where the API key came from (a flag, a variable, a file).
	keyFrom string
}

// newAPINoun makes a noun whose verbs call the server: the connection and
// output flags are the noun's, so every verb takes them.
func newAPINoun(s streams, use, short string, verbs func(cli *cliContext) []*cobra.Command) *cobra.Command {
	cli := &cliContext{streams: s}
	cmd := newNoun(use, short, verbs(cli)...)
	cli.register(cmd.PersistentFlags())
	cli.explainErrors(cmd)
	return cmd
}

// register adds the connection and output flags to fs.
func (cli *cliContext) register(fs *pflag.FlagSet) {
	cli.conn.register(fs)
	cli.registerQuiet(fs)
	cli.registerOutput(fs)
}

// connFlags are the flags every API verb takes.
type connFlags struct {
	baseURL string
	apiKey  string
	dataDir string
}

func (c *connFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.baseURL, "base-url", envOr("MEMSTORE_BASE_URL", "http://127.0.0.1:8080"), "server base URL (env MEMSTORE_BASE_URL)")
	// No default from the environment: a usage text would print the key.
	fs.StringVar(&c.apiKey, "api-key", "", "API key (default: env MEMSTORE_API_KEY, then MEMSTORE_ADMIN_KEY, then <data>/admin.key)")
	fs.StringVar(&c.dataDir, "data", envOr("MEMSTORE_DATA", "./memstore-data"), "data folder of a local server, where admin.key is read from when no key is given (env MEMSTORE_DATA)")
}

// key resolves the API key: the flag, MEMSTORE_API_KEY, MEMSTORE_ADMIN_KEY,
// then the admin.key a local `memstore serve` wrote. from says which, for
// an error about a refused key.
func (c *connFlags) key() (key, from string, err error) {
	for _, k := range []struct{ value, from string }{
		{c.apiKey, "--api-key"}, {os.Getenv("MEMSTORE_API_KEY"), "MEMSTORE_API_KEY"}, {os.Getenv("MEMSTORE_ADMIN_KEY"), "MEMSTORE_ADMIN_KEY"},
	} {
		if k.value != "" {
			return k.value, k.from, nil
		}
	}
	path := filepath.Join(c.dataDir, "admin.key")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("no API key: pass --api-key or set MEMSTORE_API_KEY (no %s to fall back on; `memstore serve` writes it on first start, see --data)", path)
	}
	if err != nil {
		return "", "", fmt.Errorf("read the API key from %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), path, nil
}

// client builds the API client of a verb, after checking the flags that
// decide how its answer is printed: nothing is sent before they are right.
// It never retries: a person at the terminal (or a script) sees a failure
// at once and decides, rather than waiting through silent attempts.
func (cli *cliContext) client() (*client.Client, error) {
	if _, err := cli.format(cli.stdout); err != nil {
		return nil, err
	}
	key, from, err := cli.conn.key()
	if err != nil {
		return nil, err
	}
	cli.keyFrom = from
	c, err := client.New(cli.conn.baseURL, client.WithAPIKey(key), client.WithRetryPolicy(client.RetryPolicy{MaxRetries: 0}))
	if err != nil {
		return nil, fmt.Errorf("--base-url %q (or MEMSTORE_BASE_URL): want the server's absolute http:// or https:// URL, such as http://127.0.0.1:8080", cli.conn.baseURL)
	}
	return c, nil
}

// explain turns the failures of talking to the server into one line that
// says what was tried and what to do: a server that cannot be reached, a
// URL that is not a memstore server's root, a refused key. Other errors,
// the server's own answers above all, pass as they are.
func (cli *cliContext) explain(err error) error {
	base := cli.conn.baseURL
	var ae *api.Error
	var ue *url.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && ae.RequestID == "":
		// Every memstore answer carries a request id; this one came
		// from something else listening there.
		return fmt.Errorf("%s does not answer as a memstore server (%s); point --base-url (or MEMSTORE_BASE_URL) at the server's root, such as http://127.0.0.1:8080", base, ae.Message)
	case errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the server at %s refused the API key from %s: %s; pass the right key with --api-key or MEMSTORE_API_KEY (a local server's admin key is in <data>/admin.key)", base, cli.keyFrom, ae.Message)
	case errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound && strings.HasPrefix(ae.Message, "no route"):
		return fmt.Errorf("the server at %s answered: %s; --base-url must be the server's root, without /v1 (such as http://127.0.0.1:8080)", base, ae.Message)
	case errors.As(err, &ue) && !errors.Is(err, context.Canceled):
		return fmt.Errorf("cannot reach the server at %s (%s); start it (`memstore serve` or `memstore up`) or point --base-url (or MEMSTORE_BASE_URL) at it", base, transportReason(ue.Err))
	}
	return err
}

// transportReason is the short cause of a failed connection: "connection
// refused", "no such host", ….
func transportReason(err error) string {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "no such host " + dns.Name
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return "the connection was closed before an answer"
	}
	return err.Error()
}

// explainErrors makes every verb under cmd report its failures through
// explain.
func (cli *cliContext) explainErrors(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		cli.explainErrors(sub)
	}
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error { return cli.explain(run(cmd, args)) }
	}
}

// verb makes a leaf command whose run gets the positional arguments.
func verb(use, short, example string, args cobra.PositionalArgs, run func(ctx context.Context, args []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Example: example, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args) }}
}

// idVerb is a verb whose only argument is an object's id and that prints
// what call returns for it: get, archive, delete. call is usually a method
// expression such as (*client.Client).GetEnvironment; ids complete from
// ids.
func idVerb[T any](cli *cliContext, name, what, short, example string, ids cobra.CompletionFunc, call func(*client.Client, context.Context, string) (T, error)) *cobra.Command {
	cmd := verb(name+" <"+what+">", short, example, argCount(1, 1), func(ctx context.Context, args []string) error {
		c, err := cli.client()
		if err != nil {
			return err
		}
		v, err := call(c, ctx, args[0])
		if err != nil {
			return err
		}
		return cli.print(v)
	})
	cmd.ValidArgsFunction = ids
	return cmd
}

// listVerb is the list verb of a kind of object whose only filter is
// --archived: it prints every page of list as one listing.
func listVerb[T any](cli *cliContext, short, what, example string, list func(c *client.Client, ctx context.Context, archived bool) iter.Seq2[T, error]) *cobra.Command {
	var archived bool
	cmd := verb("list", short, example, argCount(0, 0), func(ctx context.Context, _ []string) error {
		c, err := cli.client()
		if err != nil {
			return err
		}
		return printAll(cli, list(c, ctx, archived))
	})
	cmd.Flags().BoolVar(&archived, "archived", false, "include archived "+what)
	return cmd
}

// describedCreate is the create verb of an object made of a name, an
// optional description and metadata: environments and memory stores.
// desc is nil when --description is not given.
func describedCreate[T any](cli *cliContext, short, descUsage, example string, create func(ctx context.Context, c *client.Client, name string, desc *string, md map[string]string) (T, error)) *cobra.Command {
	var desc string
	var md kvFlag
	cmd := verb("create <name>", short, example, argCount(1, 1), func(ctx context.Context, args []string) error {
		c, err := cli.client()
		if err != nil {
			return err
		}
		var d *string
		if desc != "" {
			d = &desc
		}
		v, err := create(ctx, c, args[0], d, md)
		if err != nil {
			return err
		}
		return cli.print(v)
	})
	cmd.Flags().StringVar(&desc, "description", "", descUsage)
	md = metadataFlag(cmd.Flags())
	return cmd
}

// completeIDs completes the first argument with the ids of the first page
// of a listing, each described by its name: one request, so pressing Tab
// stays cheap. A server that cannot be reached completes nothing.
func completeIDs[T any](cli *cliContext, page func(ctx context.Context, c *client.Client) ([]T, error), describe func(T) (id, desc string)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := cli.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
		defer cancel()
		items, err := page(ctx, c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, it := range items {
			if id, desc := describe(it); strings.HasPrefix(id, toComplete) {
				out = append(out, cobra.CompletionWithDesc(id, desc))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// printAll prints every item of a listing (or, with -q, their ids), after
// the last page arrived: a listing that fails half-way prints nothing but
// the error.
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

// kvFlag collects repeated key=value flags (--metadata team=infra).
type kvFlag map[string]string

func (m kvFlag) String() string { return "" }

func (m kvFlag) Type() string { return "key=value" }

func (m kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", s)
	}
	m[k] = v
	return nil
}

// metadataFlag registers the repeatable --metadata flag on fs.
func metadataFlag(fs *pflag.FlagSet) kvFlag {
	md := kvFlag{}
	fs.Var(md, "metadata", "metadata key=value (repeatable)")
	return md
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

// print writes v to the verb's stdout as --output and -q say.
func (cli *cliContext) print(v any) error {
	return cli.outputFlags.print(cli.stdout, v)
}
