package postgres

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstore/memstore/internal/storage"
	"github.com/memstore/memstore/internal/storage/sqlstore"
)

// wakeChannel is the NOTIFY channel of every change other servers wait
// for; the payload is "topic:key".
const wakeChannel = "memstore_wake"

// notifyWake sends a wake-up through q. Inside a transaction PostgreSQL
// delivers it at commit, and never for a rollback.
func notifyWake(ctx context.Context, q sqlstore.Conn, topic, key string) error {
	expr, arg := wakeExpr(topic, key)
	_, err := q.Exec(ctx, `SELECT `+expr, arg)
	return err
}

// wakeExpr is notifyWake's expression and its argument, for a statement
// that wakes beside its write (sqlstore.Dialect.Notify).
func wakeExpr(topic, key string) (string, any) {
	return `pg_notify('` + wakeChannel + `', ?)`, topic + ":" + key
}

// Listen implements storage.Waker with LISTEN on a connection of its own.
func (s *DB) Listen(ctx context.Context, fn func(storage.Wake)) error {
	conn, err := s.listenConn(ctx)
	if err != nil {
		return unavailable(err)
	}
	go func() {
		for {
			n, err := conn.WaitForNotification(ctx)
			if err == nil {
				topic, key, _ := strings.Cut(n.Payload, ":")
				fn(storage.Wake{Topic: topic, Key: key})
				continue
			}
			conn.Close(context.WithoutCancel(ctx))
			if ctx.Err() != nil {
				return
			}
			slog.Warn("postgres wake-up listener lost its connection; reconnecting (event streams and long polls wake at their next keepalive meanwhile)", "err", err)
			for conn == nil || conn.IsClosed() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				conn, _ = s.listenConn(ctx)
			}
			// Whatever changed while the listener was away: wake every
			// waiter once, so none waits for a change it missed.
			fn(storage.Wake{})
		}
	}()
	return nil
}

func (s *DB) listenConn(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+wakeChannel); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}
