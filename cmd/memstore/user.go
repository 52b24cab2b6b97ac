package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/memstore/memstore/internal/console"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// The user verbs manage the people who sign in to the web console. They
// open the data folder's database directly, next to a running server or
// not: the API has no way to make console users, so an API key can never
// turn itself into a console login.
func init() {
	commands["user"] = command{summary: "manage web console users (create, list, delete, passwd)", run: noun("user", map[string]verb{
		"create": {summary: "add a console user; the password is read from the terminal or standard input, or --generate", run: userCreate},
		"list":   {summary: "list console users", run: userList},
		"delete": {summary: "delete a console user, signing them out at once", run: userDelete},
		"passwd": {summary: "set a console user's password, signing them out everywhere", run: userPasswd},
	})}
}

// userFlags are the flags of every user verb: the data folder.
func userFlags(cli *cliContext) (*flag.FlagSet, *string) {
	fs := newFlagSet(cli.name, cli.stderr)
	data := fs.String("data", envOr("MEMSTORE_DATA", "./memstore-data"), "data folder of the server (env MEMSTORE_DATA)")
	return fs, data
}

func openUsers(ctx context.Context, data string) (*sqlite.DB, error) {
	path := filepath.Join(data, "memstore.db")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no database at %s: run the user verbs with the server's --data folder (start `memstore serve` once to create it)", path)
	}
	return sqlite.Open(ctx, path, sqlite.Options{})
}

// password returns a generated password (the caller prints it once it is
// stored), one read from the terminal without echo (asked twice), or the
// first line of standard input.
func password(cli *cliContext, generate bool) (string, error) {
	if generate {
		return console.GeneratePassword(), nil
	}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(cli.stderr, "Password: ")
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cli.stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprint(cli.stderr, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cli.stderr)
		if err != nil {
			return "", err
		}
		if string(a) != string(b) {
			return "", errors.New("the two passwords differ; nothing was changed")
		}
		return string(a), nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password: type it at the prompt, pipe it on standard input, or pass --generate")
	}
	return line, nil
}

func userCreate(ctx context.Context, cli *cliContext, args []string) error {
	fs, data := userFlags(cli)
	generate := fs.Bool("generate", false, "generate a password and print it")
	pos, err := cli.parse(fs, args, "[flags] <name>", 1, 1)
	if err != nil {
		return err
	}
	db, err := openUsers(ctx, *data)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := console.CheckUserName(pos[0]); err != nil {
		return err
	}
	pw, err := password(cli, *generate)
	if err != nil {
		return err
	}
	u, err := console.CreateUser(ctx, db, pos[0], pw)
	if err != nil {
		return err
	}
	fmt.Fprintf(cli.stdout, "created console user %s (%s); sign in at <server>/console/\n", u.Name, u.ID)
	if *generate {
		fmt.Fprintf(cli.stdout, "password: %s (shown once)\n", pw)
	}
	return nil
}

func userList(ctx context.Context, cli *cliContext, args []string) error {
	fs, data := userFlags(cli)
	if _, err := cli.parse(fs, args, "[flags]", 0, 0); err != nil {
		return err
	}
	db, err := openUsers(ctx, *data)
	if err != nil {
		return err
	}
	defer db.Close()
	users, err := db.ListUsers(ctx)
	if err != nil {
		return err
	}
	for _, u := range users {
		fmt.Fprintf(cli.stdout, "%s\t%s\tcreated %s\n", u.Name, u.ID, u.CreatedAt.Format("2006-01-02 15:04:05 UTC"))
	}
	return nil
}

func userDelete(ctx context.Context, cli *cliContext, args []string) error {
	fs, data := userFlags(cli)
	pos, err := cli.parse(fs, args, "[flags] <name>", 1, 1)
	if err != nil {
		return err
	}
	db, err := openUsers(ctx, *data)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := console.DeleteUser(ctx, db, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(cli.stdout, "deleted console user %s; their open pages are signed out\n", pos[0])
	return nil
}

func userPasswd(ctx context.Context, cli *cliContext, args []string) error {
	fs, data := userFlags(cli)
	generate := fs.Bool("generate", false, "generate a password and print it")
	pos, err := cli.parse(fs, args, "[flags] <name>", 1, 1)
	if err != nil {
		return err
	}
	db, err := openUsers(ctx, *data)
	if err != nil {
		return err
	}
	defer db.Close()
	pw, err := password(cli, *generate)
	if err != nil {
		return err
	}
	if err := console.SetPassword(ctx, db, pos[0], pw); err != nil {
		return err
	}
	fmt.Fprintf(cli.stdout, "changed the password of %s; they are signed out everywhere\n", pos[0])
	if *generate {
		fmt.Fprintf(cli.stdout, "password: %s (shown once)\n", pw)
	}
	return nil
}
