// The remote daemon's token lives in VS Code's secret storage. A token in
// settings.json (where it used to be, readable by anything that syncs or
// shares settings) is moved there once and then ignored.

/** The secret storage key. */
export const REMOTE_TOKEN_SECRET = 'wavecast.remoteToken';
/** Global state key: the settings token was moved, so it is never copied again (a cleared token stays cleared). */
export const TOKEN_MIGRATED_STATE = 'wavecast.remoteTokenMigrated';

export interface TokenMigration {
  /** Store this token in the secret storage. */
  store: string | null;
  /** Tell the user this, once: afterwards the migration is marked done. */
  notice: string | null;
  /** Write this to the log. */
  log: string | null;
}

const REMOVE_IT =
  'Remove "wavecast.remoteToken" from your settings.json: it is no longer read. ' +
  'Use "wavecast: Set Remote Token" to change the token.';

export function planTokenMigration(settingsToken: string | null, storedToken: string | null, migratedBefore: boolean): TokenMigration {
  if (!settingsToken) return { store: null, notice: null, log: null };
  const ignored = `wavecast.remoteToken in the settings is ignored; the token in the secret storage is used. ${REMOVE_IT}`;
  if (migratedBefore) return { store: null, notice: null, log: ignored };
  if (storedToken) return { store: null, notice: ignored, log: ignored };
  return {
    store: settingsToken,
    notice: `wavecast moved the remote token from your settings to VS Code's secret storage. ${REMOVE_IT}`,
    log: 'Moved wavecast.remoteToken from the settings to the secret storage.',
  };
}

export function missingTokenMessage(): string {
  return (
    'wavecast.remoteAddress is set but no token is stored: run "wavecast: Set Remote Token" and paste the token ' +
    '`wavecast serve --listen` printed (or the first line of its --token-file).'
  );
}
