"""Schema registries: the wire format of registry-encoded records (`wire`), schemas in
canonical form (`canonical`), one HTTP client for Confluent's API, which Apicurio serves too
(`client`), and whether the ids records carry mean the same schema on both clusters'
registries (`parity`)."""
