package guardfault

// ExchangeCounter: the PostgreSQL exchange function ("<ns>_scope_set")
// requires the session counter's next value to equal the counter the
// exchange value was signed for, so a value verifies once. Disabled, the
// generated function takes the counter's next value without comparing
// it, and a captured exchange value verifies again on the same backend;
// TestExchangeReplayRefused must notice (TestExchangeCounterIsLoadBearing).
const ExchangeCounter Fix = "exchange_counter"
