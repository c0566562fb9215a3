package sqlstore_test

import (
	"testing"

	"orderpay/sqlstore/storetest"
	"orderpay/webhook"
)

func TestWebhookStoreSQLite(t *testing.T) {
	t.Parallel()
	storetest.RunWebhooks(t, func(t *testing.T) webhook.Store { return storetest.OpenSQLite(t) })
}

func TestWebhookStorePostgres(t *testing.T) {
	t.Parallel()
	storetest.RequirePostgres(t)
	storetest.RunWebhooks(t, func(t *testing.T) webhook.Store { return storetest.OpenPostgres(t) })
}
