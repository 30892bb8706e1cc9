// A real OAuth 2.0 / OpenID Connect authorization server for the OAuth tests:
// oidc-provider (panva, OpenID certified), configured for the client
// credentials grant, authorization code + PKCE with dynamic client
// registration, and RFC 8707 resource indicators, so it issues JWT access
// tokens whose `aud` is the resource the client asked for.
//
// It is also the third-party provider users connect their own accounts to
// (tests/test_accounts.py): a dynamically registered confidential client may
// use authorization code + refresh tokens ("openid offline_access" with
// prompt=consent), its opaque access tokens work at userinfo, which answers
// {sub, email: "<login>@example.com"}; refresh tokens rotate on every use (a
// retired one used again revokes its grant) and can be revoked (RFC 7009); a
// client named "short-lived" gets access tokens that expire 4 s after they
// are issued.
//
// Env: OIDC_PORT (the real issuer, http://127.0.0.1:OIDC_PORT), ROGUE_PORT (a
// second issuer signing with the same keys: tokens with the wrong `iss`),
// OIDC_KEYS (a private JWK set, JSON: the signing keys; the test made them).
// Prints "ready" once both listen.
import Provider from 'oidc-provider';

const keys = JSON.parse(process.env.OIDC_KEYS);

// Every client may ask for these; a token gets what it asks for within them.
const clients = [
  { client_id: 'admin', scope: 'tools:read tools:admin' },
  { client_id: 'reader', scope: 'tools:read' },
  { client_id: 'short', scope: 'tools:read tools:admin' },
  { client_id: 'es256', scope: 'tools:read tools:admin' },
  { client_id: 'eddsa', scope: 'tools:read tools:admin' },
].map((c) => ({
  ...c,
  client_secret: `${c.client_id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_basic',
}));

const signingAlg = { es256: 'ES256', eddsa: 'EdDSA' };

// Any login is accepted (devInteractions): the account is the login name.
async function findAccount(ctx, sub) {
  return { accountId: sub, claims: async () => ({ sub, email: `${sub}@example.com` }) };
}

function configuration() {
  return {
    clients,
    jwks: keys,
    findAccount,
    scopes: ['openid', 'offline_access', 'tools:read', 'tools:admin'],
    // Userinfo answers the e-mail address with the `openid` scope alone.
    claims: { openid: ['sub', 'email'] },
    ttl: {
      // oidc-provider's default, except for the client named "short-lived".
      AccessToken(ctx, token, client) {
        if (client?.clientName === 'short-lived') return 4;
        return token.resourceServer?.accessTokenTTL || 60 * 60;
      },
    },
    // An expired token is refused at once (the default allows 15 s), so a
    // test sees a short-lived token expire when it does.
    clockTolerance: 0,
    // Every refresh answers a new refresh token and retires the one used
    // (the default rotates only public clients' tokens, or old ones).
    rotateRefreshToken: true,
    features: {
      // The built-in login and consent pages: the authorization code test
      // submits their forms as a user would (any login is accepted).
      devInteractions: { enabled: true },
      // Dynamic client registration (RFC 7591), which MCP clients use.
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: false },
      // RFC 7009: a test revokes a user's grant behind Hangar's back
      // (revoking a token revokes every token of its grant).
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A request must name its resource: no token is minted for "anyone".
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => ({
          scope: 'tools:read tools:admin',
          audience: resource,
          accessTokenFormat: 'jwt',
          // The "short" client's tokens expire a second after they are issued.
          accessTokenTTL: client.clientId === 'short' ? 1 : 600,
          jwt: { sign: { alg: signingAlg[client.clientId] || 'RS256' } },
        }),
      },
    },
  };
}

function start(port) {
  const provider = new Provider(`http://127.0.0.1:${port}`, configuration());
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  return new Promise((resolve) => {
    const server = provider.listen(port, '127.0.0.1', () => resolve(server));
  });
}

await Promise.all([start(Number(process.env.OIDC_PORT)), start(Number(process.env.ROGUE_PORT))]);
console.log('ready');
