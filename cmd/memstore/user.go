package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/memstore/memstore/internal/app"
	"github.com/memstore/memstore/internal/secret"
	"github.com/memstore/memstore/internal/storage/sqlite"
)

// The user verbs manage the people who sign in to the web console. They
// open the data folder's database directly, next to a running server or
// not: the API has no way to make console users, so an API key can never
// turn itself into a console login.
func newUserCommand(s streams) *cobra.Command {
	var data string
	cmd := newNoun("user", "manage web console users (create, list, delete, passwd)",
		userVerb("create <name>", "add a console user; the password is read from the terminal or standard input, or --generate",
			`  memstore user create ada            # asks for the password twice
  memstore user create ci --generate  # prints a generated password once`,
			generateFlag, &data, s, userCreate),
		userVerb("list", "list console users", "  memstore user list\n  memstore user list --output json", outputFlag, &data, s, userList),
		userVerb("delete <name>", "delete a console user, signing them out at once", "  memstore user delete ada", nil, &data, s, userDelete),
		userVerb("passwd <name>", "set a console user's password, signing them out everywhere", "  memstore user passwd admin --generate", generateFlag, &data, s, userPasswd),
	)
	cmd.PersistentFlags().StringVar(&data, "data", envOr("MEMSTORE_DATA", "./memstore-data"), "data folder of the server (env MEMSTORE_DATA)")
	return cmd
}

// userVerb makes a user verb: it opens the database of the data folder
// and runs do with it; flags, when not nil, adds the verb's own flags.
func userVerb(use, short, example string, flags func(*pflag.FlagSet, *userContext), data *string, s streams, do func(ctx context.Context, u userContext, args []string) error) *cobra.Command {
	u := userContext{streams: s}
	nargs := argCount(1, 1) // the user's name
	if !strings.Contains(use, "<name>") {
		nargs = argCount(0, 0)
	}
	cmd := verb(use, short, example, nargs, func(ctx context.Context, args []string) error {
		db, err := openUsers(ctx, *data)
		if err != nil {
			return err
		}
		defer db.Close()
		u.db = db
		return do(ctx, u, args)
	})
	if flags != nil {
		flags(cmd.Flags(), &u)
	}
	return cmd
}

// generateFlag adds --generate, to the verbs that set a password.
func generateFlag(fs *pflag.FlagSet, u *userContext) {
	fs.BoolVar(&u.generate, "generate", false, "generate a password and print it")
}

// outputFlag adds --output, to the verb that lists users.
func outputFlag(fs *pflag.FlagSet, u *userContext) {
	u.out.registerOutput(fs)
}

// userContext is what a user verb runs with.
type userContext struct {
	streams
	db       *sqlite.DB
	generate bool
	out      outputFlags
}

// consoleUser is a console user as the user verbs print it: never with
// its password hash.
type consoleUser struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
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
func password(u userContext) (string, error) {
	if u.generate {
		return secret.GeneratePassword(), nil
	}
	if f, ok := u.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(u.stderr, "Password: ")
		a, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(u.stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprint(u.stderr, "Again: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(u.stderr)
		if err != nil {
			return "", err
		}
		if string(a) != string(b) {
			return "", errors.New("the two passwords differ; nothing was changed")
		}
		return string(a), nil
	}
	line, err := bufio.NewReader(u.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password: type it at the prompt, pipe it on standard input, or pass --generate")
	}
	return line, nil
}

func userCreate(ctx context.Context, u userContext, args []string) error {
	if err := app.CheckUserName(args[0]); err != nil {
		return err
	}
	pw, err := password(u)
	if err != nil {
		return err
	}
	user, err := app.NewUsers(u.db, nil, nil).Create(ctx, args[0], pw)
	if err != nil {
		return err
	}
	fmt.Fprintf(u.stdout, "created console user %s (%s); sign in at <server>/console/\n", user.Name, user.ID)
	if u.generate {
		fmt.Fprintf(u.stdout, "password: %s (shown once)\n", pw)
	}
	return nil
}

func userList(ctx context.Context, u userContext, _ []string) error {
	users, err := u.db.ListUsers(ctx)
	if err != nil {
		return err
	}
	list := make([]consoleUser, len(users))
	for i, user := range users {
		list[i] = consoleUser{ID: user.ID, Name: user.Name, CreatedAt: user.CreatedAt.UTC()}
	}
	return u.out.print(u.stdout, list)
}

func userDelete(ctx context.Context, u userContext, args []string) error {
	if err := app.NewUsers(u.db, nil, nil).Delete(ctx, args[0]); err != nil {
		return err
	}
	fmt.Fprintf(u.stdout, "deleted console user %s; their open pages are signed out\n", args[0])
	return nil
}

func userPasswd(ctx context.Context, u userContext, args []string) error {
	pw, err := password(u)
	if err != nil {
		return err
	}
	if err := app.NewUsers(u.db, nil, nil).SetPassword(ctx, args[0], pw); err != nil {
		return err
	}
	fmt.Fprintf(u.stdout, "changed the password of %s; they are signed out everywhere\n", args[0])
	if u.generate {
		fmt.Fprintf(u.stdout, "password: %s (shown once)\n", pw)
	}
	return nil
}
