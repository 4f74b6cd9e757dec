/**
 * Schemas of the sign-in methods beyond passwords (docs/auth.md): request bodies,
 * answers, and the login answer that may be the MFA step instead of tokens.
 */
import { t } from 'elysia';
import { AREA } from '../../http/areas';
import { successOf } from '../../http/envelope-schemas';
import { Session, User } from './model';
import { MFA_TOKEN_SECONDS } from './totp';
import { EMAIL_CODE_SECONDS } from './email-codes';
import { ONE_TIME_CODE_SECONDS } from './identities';

const Email = t.String({ maxLength: 320, description: 'E-mail address (normalized as on login).' });
const SixDigits = (description: string) => t.String({ maxLength: 10, description, example: '492039' });
const OneTime = (description: string) =>
  t.String({ maxLength: 200, description, example: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM' });
const RedirectTo = t.String({
  maxLength: 2000,
  description: 'Where the browser returns: an absolute URL allowed by auth.redirect_allowlist.',
  example: 'https://app.example.com/auth/callback',
});

const ok = successOf(AREA.auth);

const MfaStep = t.Object(
  {
    mfa_required: t.Literal(true),
    mfa_token: OneTime(
      `Send with the second factor to POST /api/v1/auth/mfa/verify; valid ${MFA_TOKEN_SECONDS / 60} minutes.`,
    ),
    expires_in: t.Integer({ description: 'Seconds the mfa_token is valid.', example: MFA_TOKEN_SECONDS }),
  },
  { title: 'AuthMfaStep', description: 'The password (or code, or provider) was right; a second factor is needed.' },
);

/** A login answer: the session, or the MFA step (no tokens) when the user has a second factor. */
export const SignInAnswer = ok(t.Union([Session.properties.data, MfaStep]), {
  title: 'AuthSignIn',
  description: 'The user and tokens of a new session, or `{mfa_required: true, mfa_token}` when a second factor is on.',
});

const Identity = t.Object(
  {
    id: t.String({ format: 'uuid' }),
    provider: t.String({ example: 'google' }),
    email: t.Nullable(t.String({ description: 'The address the provider gave at the last sign-in.' })),
    email_verified: t.Boolean({ description: 'Whether the provider said that address is verified.' }),
    created_at: t.String({ format: 'date-time' }),
    last_used_at: t.String({ format: 'date-time' }),
  },
  { title: 'AuthIdentity' },
);

export const SignInBodies = {
  otpRequest: t.Object({ email: Email }, { title: 'OtpRequest', example: { email: 'ada@example.com' } }),
  otpVerify: t.Object(
    { email: Email, code: SixDigits('The 6-digit code from the auth.otp mail.') },
    { title: 'OtpVerify', example: { email: 'ada@example.com', code: '492039' } },
  ),
  code: t.Object(
    { code: SixDigits('The current 6-digit code of the authenticator app.') },
    { title: 'TotpCode', example: { code: '492039' } },
  ),
  mfaVerify: t.Object(
    {
      mfa_token: OneTime('From the login answer.'),
      code: t.Optional(SixDigits('The current 6-digit code of the authenticator app.')),
      recovery_code: t.Optional(t.String({ maxLength: 40, description: 'One unused recovery code (xxxxx-xxxxx).' })),
    },
    {
      title: 'MfaVerify',
      example: { mfa_token: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM', code: '492039' },
    },
  ),
  exchange: t.Object(
    { code: OneTime(`The #code= of the callback's redirect; single use, valid ${ONE_TIME_CODE_SECONDS} s.`) },
    { title: 'OAuthExchange', example: { code: 'k3Jd9sQw0PzL1xVb.Hq7mM2r0aVtY4nq1Jd8sLw9pXoZb3cE5fG6hI7jK8lM' } },
  ),
  link: t.Object(
    { redirect_to: RedirectTo },
    { title: 'OAuthLink', example: { redirect_to: 'https://app.example.com/settings/sign-in' } },
  ),
};

export const SignInQuery = {
  start: t.Object({
    redirect_to: RedirectTo,
    link: t.Optional(OneTime('The ticket from POST /api/v1/auth/oauth/<name>/link (linking only).')),
  }),
  confirmLink: t.Object({
    confirm: t.String({ maxLength: 100, description: "The confirmation page's token." }),
    decline: t.Optional(t.String({ maxLength: 10, description: 'Present: the user declined; nothing is linked.' })),
  }),
  callback: t.Object({
    state: t.Optional(t.String({ maxLength: 200 })),
    code: t.Optional(t.String({ maxLength: 2000 })),
    error: t.Optional(t.String({ maxLength: 200 })),
  }),
};

export const SignInResponses = {
  accepted: ok(t.Object({ message: t.String() }), { title: 'AuthAccepted' }),
  signIn: SignInAnswer,
  session: Session,
  enroll: ok(
    t.Object({
      secret: t.String({ description: 'Base32 TOTP secret, for typing into an authenticator app.' }),
      otpauth_url: t.String({ description: 'otpauth:// URI (show as a QR code). SHA-1, 6 digits, 30 s.' }),
    }),
    { title: 'TotpEnrollment' },
  ),
  recoveryCodes: ok(
    t.Object({
      recovery_codes: t.Array(t.String(), {
        description: 'Ten single-use codes for when the authenticator is lost. Shown only now: stored as hashes.',
      }),
    }),
    { title: 'TotpConfirmed' },
  ),
  done: ok(t.Object({ message: t.String() }), { title: 'AuthMessage' }),
  methods: ok(
    t.Object({
      identities: t.Array(Identity),
      has_password: t.Boolean(),
      totp_enabled: t.Boolean(),
      recovery_codes_left: t.Integer(),
    }),
    { title: 'AuthSignInMethods', description: "The user's ways to sign in." },
  ),
  link: ok(
    t.Object({
      url: t.String({
        description: `Send the browser here (a top-level navigation) within ${ONE_TIME_CODE_SECONDS} s; it comes back to redirect_to with #linked=<provider> or #error=<code>.`,
      }),
    }),
    { title: 'OAuthLinkStart' },
  ),
  user: ok(t.Object({ user: User })),
};

export { EMAIL_CODE_SECONDS };
