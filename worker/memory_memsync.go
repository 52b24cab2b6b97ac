package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/memstore/memstore/client"
)

// INTERIM: replaced by memsync.NewSession when it lands on main.
const minMemorySyncInterval = 5 * time.Second

func checkMemorySyncInterval(d time.Duration) error {
	if d > 0 && d < minMemorySyncInterval {
		return fmt.Errorf("worker: memory sync interval %s is below the minimum of %s", d, minMemorySyncInterval)
	}
	return nil
}

func (w *Worker) memsyncSession(c *client.Client, stores []storeMount, log *slog.Logger) (sessionMemory, error) {
	return nil, errors.New("memory sync is not available in this build yet")
}
