/**
 * Request and response schemas of Public Auth: they validate requests (422 with
 * `details.fields` on a format problem), type the handlers and make the OpenAPI
 * document, in the area's envelope (format A, src/http/areas.ts).
 */
import { t, type Static, type TSchema } from 'elysia';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';
import { PASSWORD_MAX_LENGTH, PASSWORD_MAX_UTF16 } from './passwords';
import { ACCESS_TOKEN_SECONDS } from './jwt';
import { REFRESH_TOKEN_SECONDS } from './tokens';

const Email = t.String({
  maxLength: 320,
  description:
    'E-mail address; trimmed, NFKC-normalized and lower-cased before use; control and invisible characters are refused.',
  example: 'ada@example.com',
});
const NewPassword = (description: string) =>
  t.String({
    maxLength: PASSWORD_MAX_UTF16,
    description: `${description} At least auth.password_min_length (default 8) characters, at most ${PASSWORD_MAX_LENGTH} (Unicode code points); used exactly as sent.`,
    example: 'correct horse battery staple',
  });
const OpaqueToken = (description: string) =>
  t.String({ maxLength: 200, description, example: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM' });

export const User = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    email: t.String({ example: 'ada@example.com' }),
    email_verified: t.Boolean(),
    email_verified_at: t.Nullable(t.String({ format: 'date-time' })),
    created_at: t.String({ format: 'date-time' }),
  },
  {
    title: 'User',
    description: 'A site user.',
    example: {
      id: '4e80d2fe-8282-4d25-bee5-f7bbb164af71',
      email: 'ada@example.com',
      email_verified: true,
      email_verified_at: '2026-01-02T10:00:00.000Z',
      created_at: '2026-01-02T09:58:00.000Z',
    },
  },
);

const tokenFields = {
  access_token: t.String({
    description:
      'JWT (HS256) for Authorization: Bearer; valid expires_in seconds (auth.access_token_seconds, 15 minutes by default).',
  }),
  token_type: t.Literal('Bearer'),
  expires_in: t.Integer({
    description: 'Seconds the access token is valid (auth.access_token_seconds).',
    example: ACCESS_TOKEN_SECONDS,
  }),
  refresh_token: t.String({
    description:
      'Opaque, single use: POST /api/v1/auth/refresh returns a new one. Valid refresh_expires_in seconds (auth.refresh_token_seconds, 30 days by default).',
  }),
  refresh_expires_in: t.Integer({
    description: 'Seconds the refresh token is valid (auth.refresh_token_seconds).',
    example: REFRESH_TOKEN_SECONDS,
  }),
};

const success = successOf(AREA.auth);
/** A success body of the area; `title` names it in the OpenAPI document (components.schemas). */
const ok = <T extends TSchema>(data: T, title?: string, description?: string) => success(data, { title, description });

export const Session = ok(
  t.Object({ user: User, ...tokenFields }),
  'AuthSession',
  'A user and the tokens of a new session.',
);

export const Bodies = {
  register: t.Object(
    { email: Email, password: NewPassword('Password.') },
    { title: 'RegisterRequest', example: { email: 'ada@example.com', password: 'correct horse battery staple' } },
  ),
  login: t.Object(
    { email: Email, password: t.String({ maxLength: PASSWORD_MAX_UTF16, example: 'correct horse battery staple' }) },
    { title: 'LoginRequest', example: { email: 'ada@example.com', password: 'correct horse battery staple' } },
  ),
  refresh: t.Object(
    { refresh_token: OpaqueToken('The latest refresh token of the session.') },
    {
      title: 'RefreshRequest',
      example: { refresh_token: 'ZmkS9Av6a_ZRek_Q.suvUuQV43Wl8WUgT6YIgwmtYutl5ZRhxNFCXDtHYn7o' },
    },
  ),
  logout: t.Optional(
    t.Object(
      {
        refresh_token: t.Optional(
          OpaqueToken("Ends this token's session when no access token is sent (e.g. it expired)."),
        ),
        all: t.Optional(t.Boolean({ description: 'End every session of the user (all devices).', default: false })),
      },
      { title: 'LogoutRequest', example: { all: false } },
    ),
  ),
  forgot: t.Object({ email: Email }, { title: 'EmailRequest', example: { email: 'ada@example.com' } }),
  reset: t.Object(
    { token: OpaqueToken('Token from the password_reset mail.'), password: NewPassword('New password.') },
    {
      title: 'ResetPasswordRequest',
      example: {
        token: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM',
        password: 'a new long passphrase',
      },
    },
  ),
  change: t.Object(
    { current_password: t.String({ maxLength: PASSWORD_MAX_UTF16 }), new_password: NewPassword('New password.') },
    {
      title: 'ChangePasswordRequest',
      example: { current_password: 'correct horse battery staple', new_password: 'a new long passphrase' },
    },
  ),
  verify: t.Object(
    {
      token: OpaqueToken('Token from the verify_email mail.'),
      password: t.Optional(
        t.String({
          maxLength: PASSWORD_MAX_UTF16,
          description:
            "The account's password, showing the caller holds the account (as an access token of one of its sessions does): the password and sessions stay. Without either, confirming hands the account to the mailbox's owner (docs/auth.md, Account ownership).",
        }),
      ),
    },
    { title: 'VerifyEmailRequest', example: { token: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM' } },
  ),
  resend: t.Object({ email: Email }, { title: 'EmailRequest', example: { email: 'ada@example.com' } }),
};

export const Responses = {
  register: ok(
    t.Object({
      user: User,
      verification_required: t.Boolean({
        description: 'True when auth.email_verification_required is on: no tokens until the address is confirmed.',
      }),
      access_token: t.Optional(tokenFields.access_token),
      token_type: t.Optional(tokenFields.token_type),
      expires_in: t.Optional(tokenFields.expires_in),
      refresh_token: t.Optional(tokenFields.refresh_token),
      refresh_expires_in: t.Optional(tokenFields.refresh_expires_in),
    }),
    'AuthRegistered',
    'The new user; the tokens unless the address must be verified first.',
  ),
  session: Session,
  user: ok(t.Object({ user: User }), 'AuthUserResult', 'The user after the change.'),
  me: ok(
    t.Object({ user: User, session_id: t.String({ format: 'uuid' }) }),
    'AuthMe',
    'The signed-in user and the id of this session.',
  ),
  done: ok(t.Object({ message: t.String() }), 'AuthMessage', 'Done; a sentence to show.'),
};

/** A site user as the API shows it. */
export type PublicUser = Static<typeof User>;
