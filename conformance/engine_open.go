package conformance

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenantmcp/tenantmcp/builder"
	"github.com/tenantmcp/tenantmcp/guardedsql"
	gmysql "github.com/tenantmcp/tenantmcp/guardedsql/mysql"
	"github.com/tenantmcp/tenantmcp/guardedsql/postgres"
)

// prepareEngine finishes the scratch database after Seed: on PostgreSQL it
// grants the app role its DML rights and installs row-level security as
// the owner (postgres.ApplyRLS); on MySQL the app user's rights were
// granted on the whole database already.
func prepareEngine(ctx context.Context, s *scratch, sch *builder.Schema) error {
	if s.engine != Postgres {
		return nil
	}
	if err := s.postgresGrants(ctx, sch.TableNames()); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.ownerDSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if s.rlsKey.ID == "" {
		k, err := postgres.NewKey("conformance")
		if err != nil {
			return err
		}
		s.rlsKey = k
	}
	if err := postgres.ApplyRLS(ctx, conn, sch, postgres.Options{Key: s.rlsKey}); err != nil {
		return fmt.Errorf("conformance: installing row-level security as the owner: %w", err)
	}
	return nil
}

// openGuarded opens the guard on the scratch database as the app role.
// A property's postgres.Options (RLSOnly, Recheck) apply on PostgreSQL
// only; the scratch database's key is added to them.
func (s *scratch) openGuarded(ctx context.Context, sch *builder.Schema, opts guardedsql.Options) (*guardedsql.DB, func() error, error) {
	po, isPG := opts.Engine.(postgres.Options)
	if isPG && s.engine != Postgres {
		opts.Engine = nil
	}
	switch s.engine {
	case Postgres:
		pool, err := s.appPool(ctx, 0)
		if err != nil {
			return nil, nil, err
		}
		po.Key = s.rlsKey
		opts.Engine = po
		db, err := postgres.New(ctx, pool, sch, opts)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return db, func() error { err := db.Close(); pool.Close(); return err }, nil
	case MySQL:
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(s.guardedDSN, "mysql://"))
		if err != nil {
			return nil, nil, err
		}
		// As guardedsql.Open and gmysql.Config do: ExpectOne counts rows
		// matched, not rows changed (an own row updated to the value it
		// holds, NULL over NULL, is still one row).
		cfg.ClientFoundRows = true
		raw, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return nil, nil, err
		}
		db, err := gmysql.New(ctx, raw, sch, opts)
		if err != nil {
			raw.Close()
			return nil, nil, err
		}
		return db, func() error { err := db.Close(); raw.Close(); return err }, nil
	}
	db, err := guardedsql.Open(ctx, s.guardedDSN, sch, opts)
	if err != nil {
		return nil, nil, err
	}
	return db, db.Close, nil
}

// appPool opens a pgx pool as the app role; maxConns 0 keeps pgxpool's
// default.
func (s *scratch) appPool(ctx context.Context, maxConns int32) (*pgxpool.Pool, error) {
	return s.pgPool(ctx, s.guardedDSN, maxConns)
}

func (s *scratch) pgPool(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}
