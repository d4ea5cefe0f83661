"""Generated gRPC code of protos/medsnip/v1/search.proto (`make proto`); do not edit."""
