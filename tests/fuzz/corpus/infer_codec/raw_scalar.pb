
mlp1seed*
xUINT64: