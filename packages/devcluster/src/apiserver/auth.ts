/** Bearer-token users: one token per client, so every request carries a user. */
import { randomBytes, randomUUID } from 'node:crypto';
import type { UserInfo } from './types.ts';

export class Users {
  private readonly byToken = new Map<string, UserInfo>();

  add(name: string, groups: string[] = []): string {
    const token = randomBytes(24).toString('base64url');
    this.byToken.set(token, { username: name, uid: randomUUID(), groups: [...new Set([...groups, 'system:authenticated'])] });
    return token;
  }

  tokenFor(name: string): string | undefined {
    for (const [t, u] of this.byToken) if (u.username === name) return t;
    return undefined;
  }

  authenticate(header: string | undefined): UserInfo | undefined {
    const m = header?.match(/^Bearer\s+(\S+)$/i);
    return m ? this.byToken.get(m[1]!) : undefined;
  }
}
